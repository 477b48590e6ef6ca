package main

import (
	"context"
	"fmt"

	"github.com/shipnotify/shipnotify/migrations"
	"github.com/shipnotify/shipnotify/mirror"
)

func init() {
	register("migrate", "apply the mirror's pending schema migrations", runMigrate)
}

func runMigrate(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "migrate", "migrate")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	return withMirror(ctx, e, 2, func(d *deps, store *mirror.Store) error {
		if err := migrations.Up(ctx, store.Pool(), d.logger); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "schema is up to date")
		return nil
	})
}

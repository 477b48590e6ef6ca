package main

import (
	"context"
	"fmt"

	"github.com/shipnotify/shipnotify/migrations"
)

func init() {
	register("migrate", "apply the mirror's pending schema migrations", runMigrate)
}

func runMigrate(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "migrate", "migrate")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return err
	}
	store, closeStore, err := openMirror(ctx, cfg, 2)
	if err != nil {
		return err
	}
	defer closeStore()
	if err := migrations.Up(ctx, store.Pool(), newLogger(e, cfg)); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "schema is up to date")
	return nil
}

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
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	// Migrations run as the tables' owner; everything else as the runtime role.
	store, err := d.mirrorAt(ctx, "SHIPNOTIFY_MIGRATE_DATABASE_URL", d.cfg.MigrateDatabaseURL, 2)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, store.Pool(), d.logger); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "schema is up to date")
	return nil
}

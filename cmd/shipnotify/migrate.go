package main

import (
	"context"
	"fmt"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/migrations"
)

func init() {
	register("migrate", "apply the mirror's pending schema migrations", runMigrate)
}

func runMigrate(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "migrate", "migrate")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	// Migrations run as the tables' owner; everything else as the runtime role.
	store, err := d.MirrorAt(ctx, "SHIPNOTIFY_MIGRATE_DATABASE_URL", d.Cfg.MigrateDatabaseURL, cli.MigratePoolSize)
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, store.Pool(), d.Logger); err != nil {
		return err
	}
	fmt.Fprintln(e.Stdout, "schema is up to date")
	return nil
}

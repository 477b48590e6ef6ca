package main

import (
	"context"
	"fmt"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/mirror"
)

func init() {
	register("reseal-secrets", "seal every webhook secret in the mirror with the current payload key (after a key rotation)", runResealSecrets)
}

// runResealSecrets completes a key rotation for the secrets at rest: once a
// new key is first in SHIPNOTIFY_CODEC_KEYS, it seals every webhook secret
// still in the clear or under an older key with it, so the older key can be
// dropped. Safe to run again and beside running workers.
func runResealSecrets(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "reseal-secrets", "reseal-secrets")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	return cli.WithMirror(ctx, e, 2, func(d *cli.Deps, store *mirror.Store) error {
		if d.Cfg.Codec == nil {
			return cli.Usagef("SHIPNOTIFY_CODEC is off: there is no key to seal with")
		}
		n, err := store.ResealSecrets(ctx, 500)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "%s resealed\n", cli.Count(int64(n), "webhook secret", "webhook secrets"))
		return nil
	})
}

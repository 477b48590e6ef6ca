package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"

	"github.com/shipnotify/shipnotify/internal/cli"
)

func init() {
	register("version", "print the binary's version: module, commit, Go and Temporal SDK versions", runVersion)
}

// runVersion reads what the Go toolchain stamped into the binary: the
// module's version, the commit it was built from, and the versions of Go
// and of the Temporal SDK (which decides the workflow code's behaviour).
func runVersion(_ context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "version", "version")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("the binary carries no build information")
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	commit := cmp.Or(settings["vcs.revision"], "unknown")
	if settings["vcs.modified"] == "true" {
		commit += " (with uncommitted changes)"
	}
	sdk := "unknown"
	for _, d := range info.Deps {
		if d.Path == "go.temporal.io/sdk" {
			sdk = d.Version
		}
	}
	fmt.Fprintf(e.Stdout, "shipnotify    %s\ncommit        %s\ncommitted     %s\ngo            %s\ntemporal sdk  %s\n",
		cmp.Or(info.Main.Version, "(devel)"), commit, cmp.Or(settings["vcs.time"], "unknown"), info.GoVersion, sdk)
	return nil
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

func init() {
	register("setup", "register shipnotify's search attributes on the Temporal namespace, and wait until the server accepts them", runSetup)
}

// DefaultSetupWait is setup's --wait: a SQL-visibility server takes its
// namespace cache's refresh (seconds) to accept attributes just added.
const DefaultSetupWait = time.Minute

func runSetup(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "setup", "setup [--wait D]")
	wait := fs.Duration("wait", DefaultSetupWait, "how long to wait until the server accepts a workflow start carrying the search attributes (a probe workflow, terminated at once); 0 does not wait")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if *wait < 0 {
		return cli.Usagef("--wait must not be negative")
	}
	return cli.WithTemporal(ctx, e, func(d *cli.Deps, tc client.Client) error {
		ns := d.Cfg.Temporal.Namespace
		if err := addSearchAttributes(ctx, e, tc, ns); err != nil {
			return err
		}
		if *wait == 0 {
			return nil
		}
		// Added is not usable: the server takes them in when it next
		// refreshes its namespace cache, and a start before that is
		// refused (issue 23). So setup returns only once a start is not.
		fmt.Fprintln(e.Stdout, "waiting for the server to accept the search attributes…")
		var id string
		took, tries, err := awaitAccepted(ctx, *wait, 100*time.Millisecond, func(ctx context.Context) error {
			id = "shipnotify-setup-probe-" + randomID()
			return starter.ProbeSearchAttributes(ctx, tc, ns, id)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "the server accepts them after %s (%s; the last, %s, was accepted and terminated)\n",
			took.Round(time.Millisecond), probes(tries), id)
		return nil
	})
}

// addSearchAttributes adds those of shipnotify's search attributes the
// namespace lacks, and prints each with what was done.
func addSearchAttributes(ctx context.Context, e cli.Env, tc client.Client, ns string) error {
	have, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return fmt.Errorf("error listing search attributes: %w", err)
	}
	missing := map[string]enums.IndexedValueType{}
	for name, typ := range workflows.SearchAttributeTypes {
		if _, ok := have.GetCustomAttributes()[name]; ok {
			continue
		}
		missing[name] = typ
	}
	if len(missing) > 0 {
		_, err := tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: ns, SearchAttributes: missing,
		})
		if err != nil {
			return fmt.Errorf("error adding search attributes: %w", err)
		}
	}
	names := make([]string, 0, len(workflows.SearchAttributeTypes))
	for n := range workflows.SearchAttributeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		state := "present"
		if _, ok := missing[n]; ok {
			state = "added"
		}
		fmt.Fprintf(e.Stdout, "%-14s %-9s %s\n", n, strings.TrimPrefix(workflows.SearchAttributeTypes[n].String(), "INDEXED_VALUE_TYPE_"), state)
	}
	return nil
}

// awaitAccepted runs probe until it succeeds, backing off from first to
// at most 2 s while the server refuses for want of the search attributes
// (starter.ErrSearchAttributesUnknown), within bound. It returns how long
// that took and how many probes ran. Any other failure ends it at once:
// only the refusal is known to pass by itself.
func awaitAccepted(ctx context.Context, bound, first time.Duration, probe func(context.Context) error) (time.Duration, int, error) {
	start := time.Now()
	bounded, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	delay := first
	for tries := 1; ; tries++ {
		err := probe(bounded)
		var sa *starter.SearchAttributesError
		switch {
		case err == nil:
			return time.Since(start), tries, nil
		case ctx.Err() != nil:
			return 0, tries, ctx.Err()
		case errors.As(err, &sa):
			// The server's own words, not the advice to run setup.
			err = sa.Err
		case bounded.Err() == nil:
			return 0, tries, err
		}
		select {
		case <-ctx.Done():
			return 0, tries, ctx.Err()
		case <-bounded.Done():
			return 0, tries, fmt.Errorf("error waiting for the server to accept the search attributes: not accepted within %s "+
				"(%s, the last: %w); run setup again, with a longer --wait if the server is slow", bound, probes(tries), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func probes(n int) string { return cli.Count(int64(n), "probe", "probes") }

// randomID makes each probe's workflow id new, so no probe meets another.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

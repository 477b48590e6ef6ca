package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/workflows"
)

func init() {
	register("setup", "register shipnotify's search attributes on the Temporal namespace", runSetup)
}

func runSetup(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "setup", "setup")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	return cli.WithTemporal(ctx, e, func(d *cli.Deps, tc client.Client) error {
		ns := d.Cfg.Temporal.Namespace
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
	})
}

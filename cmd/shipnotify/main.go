// Command shipnotify sends shipment reminders due days, weeks or months
// ahead: Temporal holds the timers, PostgreSQL holds the mirror.
package main

import (
	"context"
	// Subscribers' time zones are checked and stated from the binary's own
	// copy of the IANA database: a distroless image has none.
	_ "time/tzdata"

	"github.com/shipnotify/shipnotify/internal/cli"
)

// shipnotify is the product's commands; each file registers its own.
var shipnotify = &cli.Program{
	Name:    "shipnotify",
	Summary: "durable shipment reminders on Temporal, mirrored in PostgreSQL.",
	Footer:  "Configuration comes from the environment; see docs/configuration.md.",
}

func register(name, summary string, run cli.RunFunc) { shipnotify.Register(name, summary, run) }

func main() { shipnotify.Main() }

// run runs one command line, as main does; tests call it.
func run(ctx context.Context, args []string, e cli.Env) error { return shipnotify.Run(ctx, args, e) }

// Command shipnotify-bench measures shipnotify: the reminder path against
// bare Temporal baselines (run, with the worker processes it starts), the
// Event Webhook's ingestion (events) and the mirror at scale (mirror).
// make bench runs it; the product binary does not contain it.
package main

import "github.com/shipnotify/shipnotify/internal/cli"

var shipnotifyBench = &cli.Program{
	Name:    "shipnotify-bench",
	Summary: "shipnotify's benchmarks, on a Temporal server and PostgreSQL (make bench).",
	Footer:  "Configuration comes from the environment, as shipnotify's; see docs/performance.md.",
}

func register(name, summary string, run cli.RunFunc) { shipnotifyBench.Register(name, summary, run) }

func main() { shipnotifyBench.Main() }

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

func init() {
	register("schedule", "schedule the reminders of a shipment update (JSON from -f or stdin)", runSchedule)
}

func runSchedule(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "schedule", "schedule -f update.json")
	file := fs.String("f", "-", "the update's JSON file; - reads stdin")
	if err := parseFlags(fs, e, args); err != nil {
		return err
	}
	u, err := readUpdate(e, *file)
	if err != nil {
		return err
	}
	d, err := newDeps(e)
	if err != nil {
		return err
	}
	defer d.close()
	// Check before connecting to anything: bad input writes nothing.
	rems, err := d.newStarter().Plan(ctx, u)
	if err != nil {
		return usageError{err}
	}
	st, err := d.starter(ctx)
	if err != nil {
		return err
	}
	results, err := st.SchedulePlanned(ctx, u, rems)
	printResults(e, results)
	return err
}

// printResults writes one JSON line per reminder a start reached.
func printResults(e env, results []starter.Result) {
	enc := json.NewEncoder(e.stdout)
	for _, r := range results {
		if r.ReminderID != "" {
			_ = enc.Encode(r)
		}
	}
}

func readUpdate(e env, file string) (reminder.Update, error) {
	var in io.Reader = e.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return reminder.Update{}, usagef("cannot read update file: %v", err)
		}
		defer f.Close()
		in = f
	}
	u, err := reminder.ParseUpdate(in)
	if err != nil {
		return reminder.Update{}, usageError{err}
	}
	return u, nil
}

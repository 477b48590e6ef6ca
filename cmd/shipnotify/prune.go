package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

func init() {
	register("prune", "retention: remove finished reminders older than an age, with their events and deliveries", runPrune)
}

// pruneUnforcedAge is the youngest age prune takes without --force: a
// retention under a month is more often a typo (9d for 90d) than a policy.
const pruneUnforcedAge = 30 * 24 * time.Hour

// maxPruneBatch keeps a batch's transaction, and the locks it holds, short.
const maxPruneBatch = 10_000

func runPrune(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "prune", "prune --older-than AGE [--batch N] [--export FILE [--format jsonl|csv]] [--updates] [--dry-run] [--force] [--pause D] [--json]")
	olderThan := fs.String("older-than", "", "required: how long a reminder has been finished, due and unchanged, in days (90d) or as a duration (2160h); at least 4d")
	batch := fs.Int("batch", mirror.DefaultPruneBatch, fmt.Sprintf("reminders per transaction (1 to %d)", maxPruneBatch))
	export := fs.String("export", "", "first write the reminders removed to this file, which must not exist yet, in export's format")
	format := fs.String("format", mirror.FormatJSONL, "the --export file's format: jsonl or csv")
	updates := fs.Bool("updates", false, "also remove the update rows left with no reminder; a resubmission of such an update is then scheduled and sent again (kept, it is refused as changed)")
	dryRun := fs.Bool("dry-run", false, "count what would go; remove nothing")
	force := fs.Bool("force", false, "take an age under 30 days (never under 4)")
	pause := fs.Duration("pause", 0, "rest between batches, to go gently on a busy mirror")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return err
	}
	switch {
	case age < mirror.PruneMinAge:
		return cli.Usagef("--older-than: at least 4d: a compensation or escalation notice may still run on a reminder finished less than 4 days ago")
	case age < pruneUnforcedAge && !*force:
		return cli.Usagef("--older-than: under 30 days; pass --force if that is the retention you mean")
	case *batch < 1 || *batch > maxPruneBatch:
		return cli.Usagef("--batch: want 1 to %d", maxPruneBatch)
	case *pause < 0:
		return cli.Usagef("--pause: must not be negative")
	case *export != "" && *dryRun:
		return cli.Usagef("--export and --dry-run: a dry run removes nothing to export")
	}
	if _, err := mirror.NewRowWriter(io.Discard, *format); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	if *export != "" {
		if _, err := os.Lstat(*export); err == nil {
			return cli.Usagef("--export: %s exists; prune does not overwrite an archive", *export)
		}
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	store, err := d.MirrorAt(ctx, "SHIPNOTIFY_PRUNE_DATABASE_URL", d.Cfg.PruneDatabaseURL, 2)
	if err != nil {
		return err
	}
	// An older schema's trigger lets no event go.
	if err := cli.RequireMigrated(ctx, store); err != nil {
		return err
	}
	o := mirror.PruneOptions{OlderThan: age, Batch: *batch, Updates: *updates, DryRun: *dryRun, Pause: *pause}
	lastLog := time.Now()
	o.OnBatch = func(s mirror.PruneStats) {
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			d.Logger.InfoContext(ctx, "pruning", "reminders", s.Reminders, "batches", s.Batches, "skipped", s.Skipped)
		}
	}
	var archive *archiveFile
	if *export != "" {
		if archive, err = createArchive(*export, *format); err != nil {
			return err
		}
		o.Archive = archive.write
	}
	stats, err := store.Prune(ctx, o)
	if archive != nil {
		if cerr := archive.close(); err == nil {
			err = cerr
		}
	}
	if perr := printPruneSummary(e.Stdout, stats, o, *asJSON); err == nil {
		err = perr
	}
	return err
}

var daysAge = regexp.MustCompile(`^([0-9]+)d$`)

// errTooManyDays is a day count longer than any mirror holds.
var errTooManyDays = errors.New("more days than a mirror holds")

// parseDays reads whole days (90d) or a positive Go duration (2160h).
func parseDays(s string) (time.Duration, error) {
	if m := daysAge.FindStringSubmatch(s); m != nil {
		days, err := strconv.Atoi(m[1])
		if err != nil || days > 100*365 {
			return 0, errTooManyDays
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want days like 90d or a duration like 2160h, not %q", s)
	}
	return d, nil
}

// parseAge reads --older-than: whole days (90d) or a Go duration (2160h).
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, cli.Usagef("--older-than is required, like --older-than 90d")
	}
	d, err := parseDays(s)
	switch {
	case errors.Is(err, errTooManyDays):
		return 0, cli.Usagef("--older-than: %q is more days than a mirror holds", s)
	case err != nil:
		return 0, cli.Usagef("--older-than: want days like 90d or a duration like 2160h, not %q", s)
	}
	return d, nil
}

// archiveFile is prune's --export file: each batch is written and synced
// to disk before the batch's rows are deleted.
type archiveFile struct {
	f   *os.File
	buf *bufio.Writer
	w   mirror.RowWriter
}

func createArchive(path, format string) (*archiveFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, cli.Usagef("--export: %s exists; prune does not overwrite an archive", path)
	}
	if err != nil {
		return nil, cli.Usagef("--export: %v", err)
	}
	a := &archiveFile{f: f, buf: bufio.NewWriterSize(f, 1<<20)}
	if a.w, err = mirror.NewRowWriter(a.buf, format); err != nil {
		_ = f.Close()
		return nil, err
	}
	return a, nil
}

func (a *archiveFile) write(rows []mirror.Row) error {
	for _, r := range rows {
		if err := a.w.Write(r); err != nil {
			return err
		}
	}
	if err := a.w.Flush(); err != nil {
		return err
	}
	if err := a.buf.Flush(); err != nil {
		return err
	}
	return a.f.Sync()
}

func (a *archiveFile) close() error {
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("error closing the archive: %w", err)
	}
	return nil
}

func printPruneSummary(w io.Writer, s mirror.PruneStats, o mirror.PruneOptions, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(struct {
			mirror.PruneStats
			DryRun          bool    `json:"dry_run"`
			UpdatesRemoved  bool    `json:"updates_removed"`
			RemindersPerSec float64 `json:"reminders_per_second"`
			RowsPerSecond   float64 `json:"rows_per_second"`
			ElapsedSeconds  float64 `json:"elapsed_seconds"`
		}{s, o.DryRun, o.Updates && !o.DryRun, perSecond(s.Reminders, s.Elapsed), perSecond(s.Rows(), s.Elapsed), s.Elapsed.Seconds()})
	}
	verb := "pruned"
	if o.DryRun {
		verb = "would prune"
	}
	var states []string
	for _, st := range reminder.FinalStates {
		if n := s.ByState[st]; n > 0 {
			states = append(states, fmt.Sprintf("%s %s", st, thousands(float64(n))))
		}
	}
	byState := ""
	if len(states) > 0 {
		byState = " (" + strings.Join(states, ", ") + ")"
	}
	events, deliveries := counted(s.Events, "event", "events"), counted(s.Deliveries, "delivery", "deliveries")
	rows := fmt.Sprintf("%s and %s", events, deliveries)
	switch {
	case o.Updates && o.DryRun:
		rows = fmt.Sprintf("%s, %s and the updates they leave empty", events, deliveries)
	case o.Updates:
		rows = fmt.Sprintf("%s, %s and %s", events, deliveries, counted(s.Updates, "update", "updates"))
	}
	_, err := fmt.Fprintf(w, "%s %s%s, %s in %s: %s reminders/s, %s rows/s\n",
		verb, counted(s.Reminders, "reminder", "reminders"), byState, rows,
		s.Elapsed.Round(time.Millisecond), thousands(perSecond(s.Reminders, s.Elapsed)), thousands(perSecond(s.Rows(), s.Elapsed)))
	if err == nil && s.Skipped > 0 {
		_, err = fmt.Fprintf(w, "kept %s still in use (a delivery sending or recent, a recent event, a disabled webhook endpoint) or held by another transaction\n",
			counted(s.Skipped, "old finished reminder", "old finished reminders"))
	}
	return err
}

// counted is cli.Count with thousands separated: "1 event", "12,000 events".
func counted(n int64, one, many string) string {
	if n == 1 {
		return cli.Count(n, one, many)
	}
	return thousands(float64(n)) + " " + many
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

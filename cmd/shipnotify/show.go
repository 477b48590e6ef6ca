package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

func init() {
	register("show", "show one reminder: its mirror row, its events and its workflow's status", runShow)
}

// workflowStatus is what Temporal says of a reminder's workflow.
type workflowStatus struct {
	Status        string     `json:"status"`
	RunID         string     `json:"run_id,omitempty"`
	StartTime     *time.Time `json:"start_time,omitempty"`
	CloseTime     *time.Time `json:"close_time,omitempty"`
	HistoryLength int64      `json:"history_length,omitempty"`
}

// showOutput is show --json's output: the reminder and its trail in the
// API's wire format (as GET one reminder gives them), then the workflow
// as Temporal spells it.
type showOutput struct {
	Reminder api.Reminder   `json:"reminder"`
	Events   []api.Event    `json:"events"`
	Workflow workflowStatus `json:"workflow"`
	// Live is the running workflow's own account (its status query).
	Live *workflows.Status `json:"live,omitempty"`
	// Digest is the digest it goes out in, when it goes out in one: the
	// wire's interval and key, with the count of its members, which the
	// wire does not carry.
	Digest *showDigest `json:"digest,omitempty"`
	// goesOutAt and window are the mirror's, for the text: the wire
	// format (Reminder) says them as the API does.
	goesOutAt time.Time
	window    *reminder.SendWindow
}

// showDigest is the digest a reminder goes out in.
type showDigest struct {
	// Every is the interval, as the update wrote it ("30m").
	Every string `json:"every"`
	every time.Duration
	// Key is the digest's key once its send is sealed ("" before), and
	// Members how many reminders it holds, this one included (0 before).
	Key     string `json:"key,omitempty"`
	Members int    `json:"members,omitempty"`
}

// text says the digest for people: before the seal, how the reminder
// goes out ("goes out with its address's other reminders in a digest
// every 30m"); after it, the digest it went in ("sent in digest <key>
// with 2 others"), which list --digest-key lists. sent says whether its
// send is recorded; a sealed digest not yet sent (or failed) is "in".
func (d showDigest) text(sent bool) string {
	if d.Key == "" {
		return reminder.GoingOutInDigest(d.every)
	}
	verb := "in"
	if sent {
		verb = "sent in"
	}
	others := "no others"
	if d.Members > 1 {
		others = cli.Count(int64(d.Members-1), "other", "others")
	}
	return fmt.Sprintf("%s digest %s with %s (every %s)", verb, d.Key, others, d.Every)
}

func runShow(ctx context.Context, e cli.Env, args []string) error {
	fs := cli.NewFlags(e, "show", "show [--json] <reminder id>")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, e, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("show takes one reminder id (shipment/update/subscriber)")
	}
	id := fs.Arg(0)
	if !reminder.IsReminderID(id) {
		return cli.UsageError{Err: notAReminderID(id)}
	}
	d, err := cli.NewDeps(e)
	if err != nil {
		return err
	}
	defer d.Close()
	store, err := d.Mirror(ctx, 2)
	if err != nil {
		return err
	}
	row, err := store.Get(ctx, id)
	if errors.Is(err, mirror.ErrNotFound) {
		parts := strings.Split(id, "/")
		listing := "--shipment " + parts[len(parts)-3]
		if len(parts) == 4 {
			listing = "--tenant " + parts[0] + " " + listing
		}
		return fmt.Errorf("no reminder %q in the mirror (shipnotify list %s names its shipment's)", id, listing)
	}
	if err != nil {
		return err
	}
	events, err := store.Events(ctx, id)
	if err != nil {
		return err
	}
	tc, err := d.Temporal(ctx)
	if err != nil {
		return err
	}
	out := showOf(row, events, d.Cfg.IDs)
	if out.Digest != nil && out.Digest.Key != "" {
		// The digest's members are its tenant's rows under its key.
		n, _, err := store.Count(ctx, mirror.Filter{Tenant: row.Tenant, DigestKey: row.DigestKey})
		if err != nil {
			return err
		}
		out.Digest.Members = n
	}
	desc, err := tc.DescribeWorkflowExecution(ctx, row.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		out.Workflow.Status = "NOT_FOUND"
	case err != nil:
		return fmt.Errorf("error describing workflow: %w", err)
	default:
		info := desc.GetWorkflowExecutionInfo()
		out.Workflow = workflowStatus{
			Status:        info.GetStatus().String(),
			RunID:         info.GetExecution().GetRunId(),
			HistoryLength: info.GetHistoryLength(),
		}
		if t := info.GetStartTime(); t != nil {
			st := t.AsTime()
			out.Workflow.StartTime = &st
		}
		if t := info.GetCloseTime(); t != nil {
			ct := t.AsTime()
			out.Workflow.CloseTime = &ct
		}
		if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			live, err := starter.LiveStatus(ctx, tc, row, info)
			if err != nil {
				return fmt.Errorf("error querying the workflow's status: %w", err)
			}
			out.Live = &live
		}
	}
	if *asJSON {
		return writeShowJSON(e.Stdout, out)
	}
	return printShow(e, out)
}

// showOf is show's output before the workflow is asked, its events' ids
// sealed with ids, as the API and the status events show them.
func showOf(row mirror.Row, events []mirror.Event, ids *opaque.Keys) showOutput {
	out := showOutput{Reminder: api.ReminderOf(row, ids), Events: api.EventsOf(events, ids), goesOutAt: row.GoesOutAt, window: row.Window}
	if row.Digest > 0 {
		out.Digest = &showDigest{Every: reminder.DigestEvery(row.Digest), every: row.Digest, Key: row.DigestKey}
	}
	return out
}

func writeShowJSON(w io.Writer, out showOutput) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// notAReminderID says what a reminder id looks like, and what to run when
// id names a shipment instead.
func notAReminderID(id string) error {
	msg := fmt.Sprintf("%q is not a reminder id: one is shipment/update/subscriber (tenant/shipment/update/subscriber "+
		"for a tenant's), as list prints it, e.g. SHP-1001/window-1/ops", id)
	if reminder.IsID(id) {
		msg += fmt.Sprintf("; shipnotify list --shipment %s lists a shipment's reminders", id)
	}
	return errors.New(msg)
}

func printShow(e cli.Env, out showOutput) error {
	r := out.Reminder
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Reminder\t%s\n", r.ID)
	fmt.Fprintf(tw, "Shipment / update\t%s / %s\n", r.ShipmentID, r.UpdateID)
	fmt.Fprintf(tw, "Subscriber\t%s (%s)\n", r.SubscriberID, r.Channel)
	fmt.Fprintf(tw, "Due\t%s\n", r.DueAt.UTC().Format(time.RFC3339Nano))
	if out.window != nil || out.Digest != nil {
		fmt.Fprintf(tw, "Goes out\t%s\n", out.goesOutAt.UTC().Format(time.RFC3339Nano))
	}
	if w := out.window; w != nil {
		// When its send window lets it go, and why, by the clock of the
		// window's zone (the subscriber's).
		fmt.Fprintf(tw, "Send window\t%s\n", w.GoingOut(r.DueAt, out.goesOutAt))
	}
	if dg := out.Digest; dg != nil {
		// The boundary it goes out at, and (once sealed) with whom.
		fmt.Fprintf(tw, "Digest\t%s\n", dg.text(r.SentAt != nil))
	}
	fmt.Fprintf(tw, "State\t%s\n", r.State)
	fmt.Fprintf(tw, "Sent\t%s\n", orDash(r.SentAt))
	// The provider's clock, as it reported it; a webhook has no provider
	// outcome, its receiver's 2xx is its delivery.
	outcome := "none reported"
	if r.ProviderOutcome != "" {
		outcome = fmt.Sprintf("%s at %s", r.ProviderOutcome, orDash(r.ProviderOutcomeAt))
	}
	fmt.Fprintf(tw, "Provider outcome\t%s\n", outcome)
	fmt.Fprintf(tw, "Delivered\t%s\n", orDash(r.DeliveredAt))
	fmt.Fprintf(tw, "Delivery key\t%s\n", r.DeliveryKey)
	fmt.Fprintf(tw, "Workflow\t%s (%s)\n", r.WorkflowID, out.Workflow.Status)
	if err := tw.Flush(); err != nil {
		return err
	}
	if l := out.Live; l != nil {
		waiting := !l.WaitingUntil.IsZero()
		if waiting {
			fmt.Fprintln(e.Stdout, "\nLive (in its start delay, from what its start recorded):")
		} else {
			fmt.Fprintln(e.Stdout, "\nLive (the running workflow's status query):")
		}
		tw = tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		if waiting {
			fmt.Fprintf(tw, "  Waiting\t%s\n", starter.Waiting(*l))
		}
		fmt.Fprintf(tw, "  State\t%s\n", l.State)
		fmt.Fprintf(tw, "  Due\t%s\n", l.DueAt.UTC().Format(time.RFC3339Nano))
		if !l.GoesOutAt.IsZero() {
			fmt.Fprintf(tw, "  Goes out\t%s\n", l.GoesOutAt.UTC().Format(time.RFC3339Nano))
		}
		fmt.Fprintf(tw, "  Delivery key\t%s\n", l.DeliveryKey)
		if l.Approval.Required {
			decision := "none yet"
			if dr := l.Approval.Decision; dr != nil {
				// by quoted, the key apart: words in by never read as a key.
				decision = fmt.Sprintf("%s by %q", map[bool]string{true: "approved", false: "rejected"}[dr.Approved], dr.By)
				if dr.Key != "" {
					decision += ", key " + dr.Key
				}
			}
			fmt.Fprintf(tw, "  Approval\t%s (times out %s, expires %s, escalated %t)\n", decision,
				l.Approval.TimeoutAt.UTC().Format(time.RFC3339), l.Approval.ExpiresAt.UTC().Format(time.RFC3339), l.Approval.Escalated)
		}
		fmt.Fprintf(tw, "  Reschedules\t%d\n", l.Reschedules)
		for _, tr := range l.Transitions {
			fmt.Fprintf(tw, "  %s\t%s\t%s %s\n", tr.At.UTC().Format(time.RFC3339), tr.Event, tr.State, tr.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(e.Stdout, "\nEvents:")
	tw = tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	for _, ev := range out.Events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", ev.At.UTC().Format(time.RFC3339Nano), ev.Type, describeEvent(ev))
	}
	return tw.Flush()
}

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// providerPurposes name the deliveries, other than the reminder's own, a
// provider event can be about.
var providerPurposes = map[string]string{
	string(reminder.PurposeEscalation):   "its escalation",
	string(reminder.PurposeCancellation): "its cancellation notice",
	// Its own delivery under an earlier due time (another delivery key).
	string(reminder.PurposeReminder): "an earlier delivery of it",
}

// describeEvent is an event's detail as the trail prints it: a provider
// event as a sentence (its JSON buries the outcome among keys and ids),
// any other as its JSON.
func describeEvent(ev api.Event) string {
	outcome, ok := strings.CutPrefix(ev.Type, "provider_")
	if !ok {
		detail, _ := json.Marshal(ev.Detail)
		return string(detail)
	}
	rest := maps.Clone(ev.Detail)
	take := func(key string) string {
		v, ok := rest[key]
		delete(rest, key)
		if !ok || v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	var b strings.Builder
	b.WriteString("provider reported " + outcome)
	if at := take("provider_at"); at != "" {
		b.WriteString(" at " + at)
	}
	if reason := take("reason"); reason != "" {
		b.WriteString(" (" + reason + ")")
	}
	if purpose := take("purpose"); purpose != "" {
		b.WriteString(" of " + cmp.Or(providerPurposes[purpose], "its "+purpose+" delivery"))
	}
	if state := take("state"); state != "" {
		b.WriteString("; now " + state)
	}
	if id := take("event_id"); id != "" {
		b.WriteString("; event " + id)
	}
	if key := take("delivery_key"); key != "" {
		b.WriteString(", delivery " + key)
	}
	// Whatever else a later version records, as key=value.
	for _, k := range slices.Sorted(maps.Keys(rest)) {
		fmt.Fprintf(&b, "; %s=%v", k, rest[k])
	}
	return b.String()
}

package bench_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shipnotify/shipnotify/internal/tools/bench"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// digestInbox is the one address the benchmark's forty subscribers share.
const digestInbox = "ops@consignee.example"

// BenchmarkFortySubscribersOfOneInbox: forty shipments' reminders, due
// together to one ops inbox, with and without a digest, on the real parts
// (the dev server, PostgreSQL, the worker, the SendGrid stand-in). It
// reports what they cost: provider calls, billable engine actions
// (CountActions over every reminder's history), history events and
// activity attempts, each per forty reminders, and how long after they
// went out the last was recorded sent; with an instant provider and with
// one that answers 6 s after it took the mail. Run it with `make bench-digest`;
// one iteration waits for a digest boundary (up to a minute and a half).
func BenchmarkFortySubscribersOfOneInbox(b *testing.B) {
	for _, latency := range []time.Duration{0, 6 * time.Second} {
		for _, digest := range []bool{false, true} {
			name := fmt.Sprintf("%s/provider-%s", map[bool]string{false: "alone", true: "digest"}[digest], latency)
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					fortyToOneInbox(b, digest, latency)
				}
			})
		}
	}
}

// fortyToOneInbox runs one round: the provider answers latency after it
// took each mail (a slow provider holds the digest's members' keys longer,
// and their own attempts find them held).
func fortyToOneInbox(b *testing.B, digest bool, latency time.Duration) {
	s := testenv.NewStack(b)
	s.Mail.SetLatency(latency)
	ctx := context.Background()
	every := time.Minute
	boundary := reminder.DigestAt(time.Now().Add(30*time.Second), every)
	var results []starter.Result
	for i := range 40 {
		u := s.Update(b, boundary, reminder.Email)
		u.ShipmentID = fmt.Sprintf("%s-%02d", u.ShipmentID, i)
		u.Subscribers[0].Email = digestInbox
		if digest {
			u.Subscribers[0].DueAt = boundary.Add(-time.Duration(i+1) * 250 * time.Millisecond)
			u.Digest = &every
		}
		res, err := s.Starter.Schedule(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		results = append(results, res...)
	}
	wait, cancel := context.WithDeadline(ctx, boundary.Add(3*time.Minute))
	defer cancel()
	var actions bench.Actions
	var events, attempts int
	var lastSent time.Time
	for _, r := range results {
		var res workflows.ReminderResult
		if err := s.Temporal.GetWorkflow(wait, r.WorkflowID, "").Get(wait, &res); err != nil {
			b.Fatal(err)
		}
		if res.State != reminder.Sent {
			b.Fatalf("%s ended %s", r.ReminderID, res.State)
		}
		h := testenv.History(b, s.Temporal, r.WorkflowID)
		a := bench.CountActions(h.GetEvents())
		actions.Total += a.Total
		attempts += a.ActivityAttempts
		events += len(h.GetEvents())
		row, err := s.Mirror.Get(ctx, r.ReminderID)
		if err != nil {
			b.Fatal(err)
		}
		if row.SentAt != nil && row.SentAt.After(lastSent) {
			lastSent = *row.SentAt
		}
	}
	b.ReportMetric(float64(s.Mail.Requests()), "provider-calls/40")
	b.ReportMetric(float64(actions.Total), "actions/40")
	b.ReportMetric(float64(attempts), "activity-attempts/40")
	b.ReportMetric(float64(events), "history-events/40")
	b.ReportMetric(lastSent.Sub(boundary).Seconds(), "s-last-sent-after-boundary")
}

package soak

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// What the checker reads of the status events: the endpoints serve
// registered, the outbox's rows, and what each tracker received.

// Endpoint is a registered status endpoint.
type Endpoint struct {
	Name   string
	Tenant string
	Events []string
}

// takes reports whether the endpoint takes status events of type t.
func (e Endpoint) takes(t reminder.StatusType) bool { return slices.Contains(e.Events, string(t)) }

// OutboxRow is one status event for one endpoint, as the outbox ends.
type OutboxRow struct {
	// EventID is the sealed id the tracker is posted; Trail is the
	// outbox's own evt_<n>, the trail event's number.
	Endpoint, EventID, Trail, ReminderID string
	Seq                                  int
	Type, Status                         string
	Attempts                             int
	LastError                            string
}

// StatusReceipt is one post a tracker took.
type StatusReceipt struct {
	Endpoint string
	// EventID is the post's webhook-id.
	EventID string
	// Type, ReminderID, Tenant and Seq are what its body says.
	Type, ReminderID, Tenant string
	Seq                      int
	Received                 time.Time
	// AnswerIn is when the tracker answered it (sink.NeverAnswered: it
	// did not); 0 at once.
	AnswerIn time.Duration
	// Replica is the serve replica that posted it ("" unknown).
	Replica string
}

// Repeat is a status event that reached an endpoint more than once, each
// time after the one before inside a documented window.
type Repeat struct {
	Endpoint   string   `json:"endpoint"`
	EventID    string   `json:"event_id"`
	ReminderID string   `json:"reminder_id"`
	Times      int      `json:"times"`
	Windows    []string `json:"windows"`
	// Posts says when each post came, from which replica, and when the
	// tracker answered it.
	Posts string `json:"posts"`
}

// The windows in which a status event may reach an endpoint again: posts
// are at least once, and the receiver deduplicates on webhook-id.
const (
	WindowUnanswered = "the tracker took the post and did not answer within the webhook timeout; posted again under the same id"
	WindowRelay      = "the serve replica that posted it was killed or frozen before it recorded the answer (or was frozen " +
		"while the other posted it, and went on with its batch): its lease lapsed"
	WindowDatabase = "PostgreSQL was down or frozen between the answer and the end of the lease: the answer could not be recorded"
)

// Rules of the status events.
const (
	RuleStatusNotWritten  = "a status event has no outbox row for an endpoint of its tenant that takes it"
	RuleStatusNotRecorded = "a status event is not recorded delivered in the outbox"
	RuleStatusNotReached  = "a status event never reached an endpoint of its tenant"
	RuleStatusTwice       = "a status event reached an endpoint again outside the documented windows"
	RuleStatusLeak        = "a status event reached another tenant's endpoint"
	RuleStatusUnknown     = "an endpoint received an event the outbox holds no row of for it"
	RuleStatusOrder       = "a reminder's status events reached an endpoint out of order"
)

// checkStatus applies the status events' rules: every status event of the
// trail is in the outbox for each endpoint of its tenant that takes it,
// reached it once (again only inside a window) and is recorded delivered;
// none reached another tenant's endpoint; a reminder's events came in
// order.
func checkStatus(s Snapshot, add func(rule, id, format string, args ...any)) []Repeat {
	tenantOf := map[string]string{}
	for _, r := range s.Rows {
		tenantOf[r.ID] = r.Tenant
	}
	endpoints := map[string]Endpoint{}
	for _, e := range s.Endpoints {
		endpoints[e.Name] = e
	}
	type key struct{ endpoint, event string }
	outbox := map[key]OutboxRow{}
	written := map[key]bool{} // by the trail's number
	for _, o := range s.Outbox {
		outbox[key{o.Endpoint, o.EventID}] = o
		written[key{o.Endpoint, o.Trail}] = true
	}
	receipts := map[key][]StatusReceipt{}
	for _, r := range s.StatusReceipts {
		k := key{r.Endpoint, r.EventID}
		receipts[k] = append(receipts[k], r)
		ep, known := endpoints[r.Endpoint]
		if _, ok := outbox[k]; !ok {
			add(RuleStatusUnknown, r.ReminderID, "%s received %s (%s, sequence %d) at %s", r.Endpoint, r.EventID, r.Type, r.Seq,
				r.Received.Format(time.RFC3339Nano))
		}
		if known && r.Tenant != ep.Tenant {
			add(RuleStatusLeak, r.ReminderID, "%s (tenant %q) received %s of tenant %q at %s", r.Endpoint, ep.Tenant, r.EventID,
				r.Tenant, r.Received.Format(time.RFC3339Nano))
		}
	}

	// The trail's status events (by the product's own StatusOf) against
	// the outbox. A cancel that met a handed reminder makes one or none
	// by the state it met, which the trail does not keep: the outbox's
	// word is taken for those.
	for _, row := range s.Rows {
		for _, ev := range s.Events[row.ID] {
			if ev.Type == "cancelled_late" || ev.ID == 0 {
				continue
			}
			st, ok := reminder.StatusOf(ev.Type, ev.Detail, row.State)
			if !ok {
				continue
			}
			id := fmt.Sprintf("evt_%d", ev.ID)
			for _, ep := range s.Endpoints {
				if ep.Tenant != row.Tenant || !ep.takes(st.Type) {
					continue
				}
				if !written[key{ep.Name, id}] {
					add(RuleStatusNotWritten, row.ID, "%s (%s at %s) has no row for %s", id, ev.Type, ev.At.Format(time.RFC3339Nano), ep.Name)
				}
			}
		}
	}

	var repeats []Repeat
	byReminder := map[key][]OutboxRow{} // an endpoint's rows of one reminder: {endpoint, reminder id}
	for _, o := range s.Outbox {
		k := key{o.Endpoint, o.EventID}
		got := receipts[k]
		slices.SortFunc(got, func(a, b StatusReceipt) int { return a.Received.Compare(b.Received) })
		byReminder[key{o.Endpoint, o.ReminderID}] = append(byReminder[key{o.Endpoint, o.ReminderID}], o)
		if ep, ok := endpoints[o.Endpoint]; ok && tenantOf[o.ReminderID] != ep.Tenant && len(got) == 0 {
			// (One that reached it is reported by its receipt.)
			add(RuleStatusLeak, o.ReminderID, "the outbox holds %s (%s) of tenant %q for %s, an endpoint of tenant %q",
				o.EventID, o.Type, tenantOf[o.ReminderID], o.Endpoint, ep.Tenant)
		}
		if o.Status != "delivered" {
			add(RuleStatusNotRecorded, o.ReminderID, "%s %s (%s, sequence %d) is %s after %d attempt(s) (%s); it reached %s %d time(s)",
				o.Endpoint, o.EventID, o.Type, o.Seq, o.Status, o.Attempts, o.LastError, o.Endpoint, len(got))
		}
		if len(got) == 0 {
			add(RuleStatusNotReached, o.ReminderID, "%s %s (%s, sequence %d) is %s; %s never received it",
				o.Endpoint, o.EventID, o.Type, o.Seq, o.Status, o.Endpoint)
			continue
		}
		if len(got) == 1 {
			continue
		}
		rep := Repeat{Endpoint: o.Endpoint, EventID: o.EventID, ReminderID: o.ReminderID, Times: len(got), Posts: posts(got)}
		unexcused := -1
		for i := 1; i < len(got); i++ {
			w := statusWindow(got[i-1], got[i], s.Faults)
			if w == "" {
				unexcused = i
				break
			}
			rep.Windows = append(rep.Windows, w)
		}
		if unexcused >= 0 {
			add(RuleStatusTwice, o.ReminderID, "%s received %s (%s) %d times: %s; the %s post has no window: nothing killed or froze "+
				"the replica or PostgreSQL between it and the one before, which the tracker answered in %s",
				o.Endpoint, o.EventID, o.Type, len(got), posts(got), ordinal(unexcused+1), got[unexcused-1].AnswerIn)
			continue
		}
		repeats = append(repeats, rep)
	}

	// In order per reminder: each event first reached the endpoint after
	// the one before it first did.
	for k, rows := range byReminder {
		slices.SortFunc(rows, func(a, b OutboxRow) int { return cmp.Compare(a.Seq, b.Seq) })
		var last time.Time
		var lastID string
		for _, o := range rows {
			got := receipts[key{o.Endpoint, o.EventID}]
			if len(got) == 0 {
				continue
			}
			first := got[0].Received
			if first.Before(last) {
				add(RuleStatusOrder, k.event, "%s received %s (sequence %d) at %s, before %s (the event before it) first came at %s",
					k.endpoint, o.EventID, o.Seq, first.Format(time.RFC3339Nano), lastID, last.Format(time.RFC3339Nano))
			}
			last, lastID = first, o.EventID
		}
	}
	slices.SortFunc(repeats, func(a, b Repeat) int {
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.EventID, b.EventID))
	})
	return repeats
}

// statusWindow names the window a repeat post b of a falls in, "" none:
// the tracker did not answer a in time; or the replica that posted a was
// killed or frozen after it posted and before a's lease ran out, or the
// one that posted b was frozen while another posted a; or PostgreSQL was
// down or frozen when a's answer was to be recorded, before its lease ran
// out. A relay claims a row for statusevents.Lease; a repeat with none of
// these, its lease lapsed while its relay ran, is the relay's own.
func statusWindow(a, b StatusReceipt, faults []Fault) string {
	if a.AnswerIn < 0 || a.AnswerIn >= webhook.Timeout {
		return WindowUnanswered
	}
	// The body left before the tracker read it: a fault a moment before
	// a arrived may still have come before its record.
	// A fault after b was posted caused nothing: b's post bounds each.
	posted, answered, lapsed := a.Received.Add(-time.Second), a.Received.Add(a.AnswerIn), a.Received.Add(statusevents.Lease)
	if lapsed.After(b.Received) {
		lapsed = b.Received
	}
	var relay, db bool
	for _, f := range faults {
		switch f.Kind {
		case FaultKillServe, FaultStallServe:
			if (a.Replica == "" || f.Target == a.Replica) && !f.At.Before(posted) && !f.At.After(lapsed) {
				relay = true
			}
			// (Its Until is noted just after SIGCONT: the stale post may
			// come a moment before.)
			if f.Kind == FaultStallServe && (b.Replica == "" || f.Target == b.Replica) && f.At.Before(a.Received) &&
				!f.Until.Before(posted) && !f.Until.After(b.Received.Add(time.Second)) {
				relay = true
			}
		case FaultStopPG, FaultStallPG:
			if !f.At.After(lapsed) && !f.Until.Before(answered) {
				db = true
			}
		}
	}
	switch {
	case relay:
		return WindowRelay
	case db:
		return WindowDatabase
	}
	return ""
}

// posts lists when each post came, who posted it and when it was
// answered, for a violation's evidence.
func posts(rs []StatusReceipt) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		who := r.Replica
		if who == "" {
			who = "a replica"
		}
		answered := "answered at once"
		switch {
		case r.AnswerIn < 0:
			answered = "never answered"
		case r.AnswerIn > 0:
			answered = "answered in " + r.AnswerIn.Round(10*time.Millisecond).String()
		}
		parts[i] = fmt.Sprintf("%s by %s, %s", r.Received.Format("15:04:05.000"), who, answered)
	}
	return strings.Join(parts, "; ")
}

func ordinal(n int) string {
	switch n {
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}

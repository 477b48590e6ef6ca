package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// listed is one reminder on the list, with what an approver reads before
// deciding it.
type listed struct {
	mirror.Row
	// Waited is how long it has waited since it was scheduled (a reminder
	// needing approval is created awaiting it).
	Waited string
	// Awaiting: it awaits approval, so the row offers the decision.
	Awaiting bool
	// Overdue: the time it goes out (its due time, or its send window's
	// opening) has passed. A reminder a window holds is not overdue.
	Overdue bool
	// Held: a send window or a digest moves when it goes out (GoesOutAt)
	// from its due time; GoingOut says so, with the window ("" without
	// one), and InDigest with the digest's interval ("" without one).
	Held                        bool
	GoingOut                    string
	InDigest                    string
	Subject, Preview, Recipient string
	Approval                    mirror.ApprovalContext
}

// group is an update with reminders awaiting approval on the page: it can
// be approved, or rejected, whole.
type group struct {
	ShipmentID, UpdateID string
	// Awaiting counts the update's reminders awaiting approval (all of
	// them, not only the page's).
	Awaiting int
}

type listData struct {
	Rows   []listed
	Groups []group
	Filter listFilter
	// Count is how many reminders the filter matches (at most
	// mirror.CountCap; CountMore when more do).
	Count     int
	CountMore bool
	// Next is the query of the next page ("" on the last); First that of
	// the first (set past it).
	Next, First string
	States      []reminder.State
	Limit       int
}

// listFilter is what the list's query asks for.
type listFilter struct {
	// State is a state's name, "pending", or "any"; awaiting_approval by
	// default.
	State    string
	Shipment string
	// DueFrom and DueTo are days (YYYY-MM-DD) in the reader's zone, DueTo
	// included.
	DueFrom, DueTo string
	afterDue       time.Time
	afterID        string
}

// parseListFilter reads the list's query, its days in loc; a bad value is
// a problem naming the field.
func parseListFilter(q url.Values, loc *time.Location) (listFilter, mirror.Filter, error) {
	lf := listFilter{State: strings.TrimSpace(q.Get("state")), Shipment: strings.TrimSpace(q.Get("shipment")),
		DueFrom: strings.TrimSpace(q.Get("due_from")), DueTo: strings.TrimSpace(q.Get("due_to"))}
	var f mirror.Filter
	switch lf.State {
	case "":
		lf.State = string(reminder.AwaitingApproval)
		f.State = reminder.AwaitingApproval
	case "any":
	case string(mirror.Pending):
		f.State = mirror.Pending
	default:
		if !reminder.State(lf.State).Known() {
			return lf, f, fmt.Errorf("State: %q is not a state", lf.State)
		}
		f.State = reminder.State(lf.State)
	}
	if lf.Shipment != "" {
		if !reminder.IsID(lf.Shipment) {
			return lf, f, errors.New("Shipment: not a shipment id (letters, digits, and . _ - up to 64)")
		}
		f.ShipmentID = lf.Shipment
	}
	for _, d := range []struct {
		name, v string
		into    *time.Time
		next    bool
	}{{"Due from", lf.DueFrom, &f.DueFrom, false}, {"Due to", lf.DueTo, &f.DueTo, true}} {
		if d.v == "" {
			continue
		}
		day, err := time.ParseInLocation(time.DateOnly, d.v, loc)
		if err != nil {
			return lf, f, fmt.Errorf("%s: %q is not a day (YYYY-MM-DD)", d.name, d.v)
		}
		if d.next {
			day = day.AddDate(0, 0, 1)
		}
		*d.into = day
	}
	if !f.DueFrom.IsZero() && !f.DueTo.IsZero() && !f.DueFrom.Before(f.DueTo) {
		return lf, f, errors.New("Due to: comes before Due from")
	}
	if after := q.Get("after_id"); after != "" {
		due, err := time.Parse(time.RFC3339Nano, q.Get("after_due"))
		if err != nil || !reminder.IsReminderID(after) {
			return lf, f, errors.New("the page's position (after_due, after_id) is not one the list gave; start again from the first page")
		}
		lf.afterDue, lf.afterID = due, after
		f.AfterDueAt, f.AfterID = due, after
	}
	return lf, f, nil
}

// query is the filter as a query string, continuing after (due, id) when
// id is set.
func (lf listFilter) query(afterDue time.Time, afterID string) string {
	q := url.Values{}
	for k, v := range map[string]string{"state": lf.State, "shipment": lf.Shipment, "due_from": lf.DueFrom, "due_to": lf.DueTo} {
		if v != "" && (k != "state" || v != string(reminder.AwaitingApproval)) {
			q.Set(k, v)
		}
	}
	if afterID != "" {
		q.Set("after_due", afterDue.UTC().Format(time.RFC3339Nano))
		q.Set("after_id", afterID)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// list shows the tenant's reminders awaiting approval (or as the filter
// asks), due first, a page of Limit at a time, with their count, what each
// says and to whom, and each update's approve-all.
func (c *console) list(w http.ResponseWriter, r *http.Request, a Approver) {
	lf, f, err := parseListFilter(r.URL.Query(), styleFor(r, c.o.Now()).loc)
	if err != nil {
		c.problem(w, r, http.StatusBadRequest, "Bad filter", err.Error()+".")
		return
	}
	f.Tenant, f.Limit = c.tenantOf(a), c.o.Limit+1
	ctx := r.Context()
	rows, err := c.o.Mirror.List(ctx, f)
	var count int
	var more bool
	if err == nil {
		count, more, err = c.o.Mirror.Count(ctx, f)
	}
	var contexts map[string]mirror.ApprovalContext
	if err == nil {
		ids := make([]string, len(rows))
		for i, row := range rows {
			ids[i] = row.ID
		}
		contexts, err = c.o.Mirror.ApprovalContexts(ctx, f.Tenant, ids)
	}
	now := c.o.Now()
	d := listData{Filter: lf, Count: count, CountMore: more, Limit: c.o.Limit, States: reminder.States}
	if err == nil {
		if len(rows) > c.o.Limit {
			rows = rows[:c.o.Limit]
			last := rows[len(rows)-1]
			d.Next = "/console/" + lf.query(last.DueAt, last.ID)
		}
		if lf.afterID != "" {
			d.First = "/console/" + lf.query(time.Time{}, "")
		}
		d.Rows = make([]listed, len(rows))
		for i, row := range rows {
			d.Rows[i] = c.listed(row, contexts[row.ID], now)
		}
		d.Groups, err = c.groups(ctx, f.Tenant, d.Rows)
	}
	if err != nil {
		c.log.Error("console: listing reminders failed", "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return
	}
	c.render(w, r, http.StatusOK, "list.html", page{Title: "Reminders", Approver: a.Name, Data: d})
}

func (c *console) listed(row mirror.Row, ac mirror.ApprovalContext, now time.Time) listed {
	l := listed{Row: row, Waited: since(now.Sub(row.CreatedAt)), Awaiting: row.State == reminder.AwaitingApproval,
		Overdue: row.State.Pending() && !row.GoesOutAt.After(now), Subject: preview(ac.Subject, 200),
		Preview: preview(ac.Text, previewRunes), Recipient: maskRecipient(row.Channel, ac.Recipient), Approval: ac}
	if row.Window != nil || row.Digest > 0 {
		l.Held = !row.GoesOutAt.Equal(row.DueAt)
	}
	if row.Window != nil {
		l.GoingOut = row.Window.GoingOut(row.DueAt, row.GoesOutAt)
	}
	l.InDigest = inDigest(row.Digest)
	return l
}

// maxGroups bounds the updates a page offers to decide whole.
const maxGroups = 20

// groups are the updates of the page's rows awaiting approval, in the
// page's order, each with how many of its reminders await.
func (c *console) groups(ctx context.Context, tenant string, rows []listed) ([]group, error) {
	var out []group
	seen := map[[2]string]bool{}
	for _, row := range rows {
		k := [2]string{row.ShipmentID, row.UpdateID}
		if !row.Awaiting || seen[k] || len(out) == maxGroups {
			continue
		}
		seen[k] = true
		n, _, err := c.o.Mirror.Count(ctx, mirror.Filter{Tenant: tenant, ShipmentID: row.ShipmentID, UpdateID: row.UpdateID, State: reminder.AwaitingApproval})
		if err != nil {
			return nil, err
		}
		out = append(out, group{ShipmentID: row.ShipmentID, UpdateID: row.UpdateID, Awaiting: n})
	}
	return out, nil
}

// tenantOf is the tenant an approver acts for.
func (c *console) tenantOf(a Approver) string { return a.Tenant.ID(c.o.DefaultTenant) }

// event is one audit-trail entry as the page shows it.
type event struct {
	mirror.Event
	// By is the words the request gave; Key the credential it came with
	// (an API key's name, an approver). Shown apart, so words in By never
	// pass for a key.
	By, Key, Reason string
	// Rest is the other details, sorted by name.
	Rest []detail
}

// detail is one of an event's details; a hash (a delivery key) shows
// shortened.
type detail struct {
	Name, Value string
	Hash        bool
	// At is the value as a time, when it is one (a due_at): shown as every
	// time is.
	At *time.Time
}

type reminderData struct {
	listed
	Events []event
	// DigestMembers is how many reminders the digest it was sealed into
	// holds, itself included (0 before the seal, or without a digest).
	DigestMembers int
}

// reminder shows one reminder and its audit trail.
func (c *console) reminder(w http.ResponseWriter, r *http.Request, a Approver) {
	id := r.URL.Query().Get("id")
	d, ok := c.reminderData(w, r, c.tenantOf(a), id)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "reminder.html", page{Title: "Reminder " + id, Approver: a.Name, Data: d})
}

// reminderData reads one of tenant's reminders; another tenant's is not
// found, as one that does not exist.
func (c *console) reminderData(w http.ResponseWriter, r *http.Request, tenant, id string) (reminderData, bool) {
	if !reminder.IsReminderID(id) {
		// Names nothing; never asked of the mirror.
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return reminderData{}, false
	}
	row, err := c.o.Starter.Get(r.Context(), tenant, id)
	if errors.Is(err, mirror.ErrNotFound) {
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return reminderData{}, false
	}
	if err != nil {
		c.log.Error("console: reading a reminder failed", "reminder_id", id, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return reminderData{}, false
	}
	evs, err := c.o.Mirror.Events(r.Context(), id)
	if err != nil {
		c.log.Error("console: reading events failed", "reminder_id", id, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return reminderData{}, false
	}
	contexts, err := c.o.Mirror.ApprovalContexts(r.Context(), tenant, []string{id})
	if err != nil {
		c.log.Error("console: reading a reminder's context failed", "reminder_id", id, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return reminderData{}, false
	}
	d := reminderData{listed: c.listed(row, contexts[id], c.o.Now())}
	if row.DigestKey != "" {
		d.DigestMembers, _, err = c.o.Mirror.Count(r.Context(), mirror.Filter{Tenant: tenant, DigestKey: row.DigestKey})
		if err != nil {
			c.log.Error("console: counting a digest's members failed", "reminder_id", id, "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
			return reminderData{}, false
		}
	}
	d.Preview = contexts[id].Text // the page shows the whole text
	for _, e := range evs {
		d.Events = append(d.Events, toEvent(e))
	}
	return d, true
}

func toEvent(e mirror.Event) event {
	out := event{Event: e}
	for _, k := range slices.Sorted(maps.Keys(e.Detail)) {
		v := fmt.Sprint(e.Detail[k])
		switch k {
		case "by":
			out.By = v
		case "key":
			out.Key = v
		case "reason":
			out.Reason = v
		default:
			d := detail{Name: k, Value: v, Hash: isHash(v)}
			if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
				d.At = &at
			}
			out.Rest = append(out.Rest, d)
		}
	}
	return out
}

// checkReason refuses a reason too long, or holding control characters,
// bidi overrides or isolates, or line separators: it is shown to people
// in the trail and the CLI.
func checkReason(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("the reason is not valid text")
	}
	if n := utf8.RuneCountInString(s); n > starter.MaxReasonRunes {
		return fmt.Errorf("the reason is %d characters; at most %d", n, starter.MaxReasonRunes)
	}
	for _, r := range s {
		if unicode.IsControl(r) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x2028 || r == 0x2029 {
			return fmt.Errorf("the reason holds U+%04X, which is not allowed", r)
		}
	}
	return nil
}

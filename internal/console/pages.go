package console

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// awaiting is one reminder on the list.
type awaiting struct {
	mirror.Row
	// Waited is how long it has awaited approval: since it was scheduled
	// (a reminder needing approval is created awaiting it).
	Waited string
}

type listData struct {
	Rows     []awaiting
	Shipment string
	// More: more reminders await approval than the list shows.
	More  bool
	Limit int
	Now   time.Time
}

// list shows the reminders awaiting approval, due first, at most Limit,
// optionally of one shipment.
func (c *console) list(w http.ResponseWriter, r *http.Request, a Approver) {
	shipment := strings.TrimSpace(r.URL.Query().Get("shipment"))
	if len(shipment) > 64 {
		shipment = shipment[:64]
	}
	rows, err := c.o.Mirror.List(r.Context(), mirror.Filter{Tenant: c.tenantOf(a), ShipmentID: shipment, State: reminder.AwaitingApproval, Limit: c.o.Limit + 1})
	if err != nil {
		c.log.Error("console: listing reminders failed", "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return
	}
	now := c.o.Now()
	d := listData{Shipment: shipment, Limit: c.o.Limit, Now: now, More: len(rows) > c.o.Limit}
	for _, row := range rows[:min(len(rows), c.o.Limit)] {
		d.Rows = append(d.Rows, awaiting{Row: row, Waited: since(now.Sub(row.CreatedAt))})
	}
	c.render(w, http.StatusOK, "list.html", page{Title: "Awaiting approval", Approver: a.Name, Data: d})
}

// tenantOf is the tenant an approver acts for.
func (c *console) tenantOf(a Approver) string {
	tenant, err := reminder.ParseTenant("tenant", a.Tenant, c.o.DefaultTenant)
	if err != nil {
		// ParseApprovers refuses such a name; fail closed all the same:
		// no tenant is named so, and no row is found.
		return "!"
	}
	return tenant
}

// event is one audit-trail entry as the page shows it.
type event struct {
	mirror.Event
	// By is the words the request gave; Key the credential it came with
	// (an API key's name, an approver). Shown apart, so words in By never
	// pass for a key.
	By, Key, Reason string
	// Rest is the other details, key=value, sorted.
	Rest string
}

type reminderData struct {
	Row      mirror.Row
	Events   []event
	Awaiting bool
	Waited   string
}

// reminder shows one reminder and its audit trail.
func (c *console) reminder(w http.ResponseWriter, r *http.Request, a Approver) {
	id := r.URL.Query().Get("id")
	d, ok := c.reminderData(w, r, c.tenantOf(a), id)
	if !ok {
		return
	}
	c.render(w, http.StatusOK, "reminder.html", page{Title: "Reminder " + id, Approver: a.Name, Data: d})
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
	d := reminderData{Row: row, Awaiting: row.State == reminder.AwaitingApproval, Waited: since(c.o.Now().Sub(row.CreatedAt))}
	for _, e := range evs {
		d.Events = append(d.Events, toEvent(e))
	}
	return d, true
}

func toEvent(e mirror.Event) event {
	out := event{Event: e}
	var rest []string
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
			rest = append(rest, k+"="+v)
		}
	}
	out.Rest = strings.Join(rest, " ")
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

type resultData struct {
	ReminderID string
	Approve    bool
	Outcome    starter.Outcome
	// ByLink: decided through an escalation email's link.
	ByLink bool
}

// decide approves or rejects one reminder for the logged-in approver.
func (c *console) decide(w http.ResponseWriter, r *http.Request, a Approver) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read; nothing was changed.")
		return
	}
	id := r.PostForm.Get("reminder_id")
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		c.problem(w, r, http.StatusUnprocessableEntity, "Bad request", "Choose approve or reject; nothing was changed.")
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if err := checkReason(reason); err != nil {
		c.problem(w, r, http.StatusUnprocessableEntity, "Bad request", err.Error()+"; nothing was changed.")
		return
	}
	c.take(w, r, a.Name, starter.Selection{Tenant: c.tenantOf(a), ReminderID: id}, approve, reason, false)
}

// take records a decision through the starter (the mirror first, then the
// workflow) and renders what came of it.
func (c *console) take(w http.ResponseWriter, r *http.Request, by string, sel starter.Selection, approve bool, reason string, byLink bool) {
	id := sel.ReminderID
	if id == "" {
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return
	}
	// The console takes no words for by: who logged in (or the link) is
	// both the by and the key.
	outs, err := c.o.Starter.Decide(context.WithoutCancel(r.Context()), sel, approve,
		starter.Actor{By: by, Key: by, Reason: reason})
	decision := map[bool]string{true: "approve", false: "reject"}[approve]
	var out starter.Outcome
	if len(outs) == 1 {
		out = outs[0]
	}
	c.log.Info("console: decision", "reminder_id", id, "decision", decision, "by", by, "status", out.Status, "error", err != nil)
	switch {
	case errors.Is(err, mirror.ErrNotFound):
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return
	case errors.Is(err, starter.ErrNoAnswer):
		c.problem(w, r, http.StatusServiceUnavailable, "No answer",
			"The reminder did not answer in time (is a worker running?); nothing was changed. Try again.")
		return
	case err != nil:
		c.log.Error("console: decision failed", "reminder_id", id, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Failed", "The decision could not be recorded; try again.")
		return
	}
	status := http.StatusOK
	switch out.Status {
	case starter.StatusRefused:
		status = http.StatusConflict
	case starter.StatusFailed:
		status = http.StatusServiceUnavailable
	}
	c.render(w, status, "result.html", page{Title: "Decision", Approver: c.approverName(r),
		Data: resultData{ReminderID: id, Approve: approve, Outcome: out, ByLink: byLink}})
}

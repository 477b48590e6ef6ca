package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// resultItem is what came of a decision on one reminder, and when it goes
// out (or went out) as far as the mirror knows right after.
type resultItem struct {
	starter.Outcome
	// DueAt is the reminder's due time, SentAt its send (nil before it).
	DueAt  time.Time
	SentAt *time.Time
	// Passed: the due time had passed when the decision was taken, so an
	// approved reminder goes out at once.
	Passed bool
}

type resultData struct {
	Approve bool
	Items   []resultItem
	// ShipmentID and UpdateID name the update, when all of it was decided.
	ShipmentID, UpdateID string
	// ByLink: decided through an escalation email's link.
	ByLink bool
}

// One is the single item of a one-reminder decision (nil for an update's).
func (d resultData) One() *resultItem {
	if d.UpdateID == "" && len(d.Items) == 1 {
		return &d.Items[0]
	}
	return nil
}

// rejectData is the confirmation a rejection needs.
type rejectData struct {
	// ReminderID, or ShipmentID and UpdateID: what would be rejected.
	ReminderID, ShipmentID, UpdateID string
	// Awaiting counts the reminders it would reject.
	Awaiting int
	Reason   string
	// Error is why the last try was not taken ("" the first time).
	Error string
	// Back is the page to go back to without rejecting.
	Back string
}

// selection reads what a form names: one reminder (reminder_id), or every
// one of an update (shipment_id and update_id).
func (c *console) selection(form url.Values, a Approver) (starter.Selection, bool) {
	sel := starter.Selection{Tenant: c.tenantOf(a), ReminderID: form.Get("reminder_id"),
		ShipmentID: form.Get("shipment_id"), UpdateID: form.Get("update_id")}
	if sel.ReminderID != "" {
		return starter.Selection{Tenant: sel.Tenant, ReminderID: sel.ReminderID}, reminder.IsReminderID(sel.ReminderID)
	}
	return sel, reminder.IsID(sel.ShipmentID) && reminder.IsID(sel.UpdateID)
}

// rejectPage asks to confirm a rejection, with its reason: a rejection is
// never one click (GET /console/reject, from the Reject… links).
func (c *console) rejectPage(w http.ResponseWriter, r *http.Request, a Approver) {
	sel, ok := c.selection(r.URL.Query(), a)
	if !ok {
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return
	}
	c.confirmReject(w, r, sel, http.StatusOK, "", "", a)
}

// confirmReject renders the rejection's confirmation for sel, with the
// reason typed so far and why it was not taken yet.
func (c *console) confirmReject(w http.ResponseWriter, r *http.Request, sel starter.Selection, status int, reason, why string, a Approver) {
	d := rejectData{ReminderID: sel.ReminderID, ShipmentID: sel.ShipmentID, UpdateID: sel.UpdateID, Reason: reason, Error: why}
	f := mirror.Filter{Tenant: sel.Tenant, ShipmentID: sel.ShipmentID, UpdateID: sel.UpdateID, State: reminder.AwaitingApproval}
	if sel.ReminderID != "" {
		d.Back = "/console/reminder?" + url.Values{"id": {sel.ReminderID}}.Encode()
		row, err := c.o.Starter.Get(r.Context(), sel.Tenant, sel.ReminderID)
		if errors.Is(err, mirror.ErrNotFound) {
			c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
			return
		}
		if err != nil {
			c.log.Error("console: reading a reminder failed", "reminder_id", sel.ReminderID, "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; nothing was changed. Try again.")
			return
		}
		if row.State == reminder.AwaitingApproval {
			d.Awaiting = 1
		}
	} else {
		d.Back = "/console/?" + url.Values{"shipment": {sel.ShipmentID}}.Encode()
		n, _, err := c.o.Mirror.Count(r.Context(), f)
		if err != nil {
			c.log.Error("console: counting reminders failed", "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; nothing was changed. Try again.")
			return
		}
		d.Awaiting = n
	}
	c.render(w, status, "reject.html", page{Title: "Reject?", Approver: a.Name, Data: d})
}

// decide approves or rejects one reminder, or every one of an update
// awaiting approval, for the logged-in approver. A rejection needs its
// confirmation (confirm=yes, from the reject page) and a reason; without
// them it renders that page and changes nothing.
func (c *console) decide(w http.ResponseWriter, r *http.Request, a Approver) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read; nothing was changed.")
		return
	}
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		c.problem(w, r, http.StatusUnprocessableEntity, "Bad request", "Choose approve or reject; nothing was changed.")
		return
	}
	sel, ok := c.selection(r.PostForm, a)
	if !ok {
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if err := checkReason(reason); err != nil {
		if !approve {
			c.confirmReject(w, r, sel, http.StatusUnprocessableEntity, "", err.Error()+"; nothing was changed", a)
			return
		}
		c.problem(w, r, http.StatusUnprocessableEntity, "Bad request", err.Error()+"; nothing was changed.")
		return
	}
	if !approve {
		switch {
		case r.PostForm.Get("confirm") != "yes":
			c.confirmReject(w, r, sel, http.StatusOK, reason, "", a)
			return
		case reason == "":
			c.confirmReject(w, r, sel, http.StatusUnprocessableEntity, "", "Say why it is rejected: the reason goes into its audit trail; nothing was changed", a)
			return
		}
	}
	c.take(w, r, a.Name, sel, approve, reason, false)
}

// take records a decision through the starter (the mirror first, then the
// workflow) and renders what came of it, with when each reminder goes out.
func (c *console) take(w http.ResponseWriter, r *http.Request, by string, sel starter.Selection, approve bool, reason string, byLink bool) {
	// The console takes no words for by: who logged in (or the link) is
	// both the by and the key.
	ctx := context.WithoutCancel(r.Context())
	now := c.o.Now()
	outs, err := c.o.Starter.Decide(ctx, sel, approve, starter.Actor{By: by, Key: by, Reason: reason})
	decision := map[bool]string{true: "approve", false: "reject"}[approve]
	c.log.Info("console: decision", "reminder_id", sel.ReminderID, "shipment_id", sel.ShipmentID, "update_id", sel.UpdateID,
		"decision", decision, "by", by, "reminders", len(outs), "error", err != nil)
	switch {
	case errors.Is(err, mirror.ErrNotFound):
		c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such reminder.")
		return
	case errors.Is(err, starter.ErrNothingToDecide):
		c.problem(w, r, http.StatusConflict, "Nothing to decide", "No reminder of that update awaits approval; nothing was changed.")
		return
	case errors.Is(err, starter.ErrNoAnswer) && (len(outs) == 0 || sel.ReminderID != ""):
		c.problem(w, r, http.StatusServiceUnavailable, "No answer",
			"The reminder did not answer in time (is a worker running?); nothing was changed. Try again.")
		return
	case err != nil && !errors.Is(err, starter.ErrAccepted) && (len(outs) == 0 || sel.ReminderID != ""):
		c.log.Error("console: decision failed", "reminder_id", sel.ReminderID, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Failed", "The decision could not be recorded; try again.")
		return
	}
	d := resultData{Approve: approve, ByLink: byLink}
	if sel.ReminderID == "" {
		d.ShipmentID, d.UpdateID = sel.ShipmentID, sel.UpdateID
	}
	status := http.StatusOK
	for _, out := range outs {
		item := resultItem{Outcome: out}
		if row, err := c.o.Mirror.Get(ctx, out.ReminderID); err == nil {
			item.DueAt, item.SentAt, item.Passed = row.DueAt, row.SentAt, !row.DueAt.After(now)
		}
		d.Items = append(d.Items, item)
		switch out.Status {
		case starter.StatusAccepted:
			// Taken, not finished: it lands.
			status = max(status, http.StatusAccepted)
		case starter.StatusRefused:
			status = max(status, http.StatusConflict)
		case starter.StatusFailed, "", starter.StatusNoAnswer:
			status = http.StatusServiceUnavailable
		}
	}
	if err != nil && !onlyAccepted(outs) {
		status = http.StatusServiceUnavailable
	}
	c.render(w, status, "result.html", page{Title: "Decision", Approver: c.approverName(r), Data: d})
}

// onlyAccepted reports whether every outcome that did not finish is one
// its workflow accepted: the decision lands on each.
func onlyAccepted(outs []starter.Outcome) bool {
	for _, o := range outs {
		switch o.Status {
		case starter.StatusFailed, "", starter.StatusNoAnswer:
			return false
		}
	}
	return true
}

package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	// Awaiting counts the reminders it would reject; Rows are they (the
	// first maxRejectRows), with their subscribers, and More the rest.
	Awaiting int
	Rows     []listed
	More     int
	// Subject is the message's subject, when every row has the one.
	Subject string
	Reason  string
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
			err = c.rejectRows(r, &d, sel.Tenant, []mirror.Row{row})
		}
		if err != nil {
			c.log.Error("console: reading a reminder failed", "reminder_id", sel.ReminderID, "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; nothing was changed. Try again.")
			return
		}
	} else {
		d.Back = "/console/?" + url.Values{"shipment": {sel.ShipmentID}}.Encode()
		n, _, err := c.o.Mirror.Count(r.Context(), f)
		if err == nil && n > 0 {
			f.Limit = maxRejectRows
			var rows []mirror.Row
			if rows, err = c.o.Mirror.List(r.Context(), f); err == nil {
				err = c.rejectRows(r, &d, sel.Tenant, rows)
				d.More = max(n-len(rows), 0)
			}
		}
		if err != nil {
			c.log.Error("console: counting reminders failed", "error", err)
			c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; nothing was changed. Try again.")
			return
		}
		d.Awaiting = n
	}
	c.render(w, r, status, "reject.html", page{Title: "Reject?", Approver: a.Name, Data: d})
}

// maxRejectRows bounds the reminders a rejection's confirmation lists.
const maxRejectRows = 50

// rejectRows puts rows on the confirmation with what each says and to
// whom: the subject once when they share it.
func (c *console) rejectRows(r *http.Request, d *rejectData, tenant string, rows []mirror.Row) error {
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	contexts, err := c.o.Mirror.ApprovalContexts(r.Context(), tenant, ids)
	if err != nil {
		return err
	}
	now := c.o.Now()
	subjects := map[string]bool{}
	for _, row := range rows {
		l := c.listed(row, contexts[row.ID], now)
		subjects[l.Subject] = true
		d.Rows = append(d.Rows, l)
	}
	if len(subjects) == 1 {
		d.Subject = d.Rows[0].Subject
	}
	return nil
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
// workflow) and redirects (303) to what came of it, with when each
// reminder goes out; a refusal that changed nothing is answered directly.
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
	// The result is a page of its own, so a reload shows it again and
	// never posts the decision again.
	tok := resultToken{Approve: approve, Tenant: sel.Tenant, ShipmentID: d.ShipmentID, UpdateID: d.UpdateID, ByLink: byLink,
		At: now.Unix(), Status: status}
	for _, out := range outs {
		tok.Items = append(tok.Items, starter.Outcome{ReminderID: out.ReminderID, Status: out.Status, Error: out.Error,
			DecidedBy: out.DecidedBy, DecidedAt: out.DecidedAt})
	}
	if target, ok := c.resultURL(tok); ok {
		http.Redirect(w, r, target, http.StatusSeeOther)
		return
	}
	// Too many reminders for an address: the result is this answer.
	d.Items = c.resultItems(ctx, outs, now)
	c.render(w, r, status, "result.html", page{Title: "Decision", Approver: c.approverName(r), Data: d})
}

// resultItems are outs with when each goes out (or went), as the mirror
// knows now: a reload shows a send that happened since.
func (c *console) resultItems(ctx context.Context, outs []starter.Outcome, decidedAt time.Time) []resultItem {
	var items []resultItem
	for _, out := range outs {
		item := resultItem{Outcome: out}
		if row, err := c.o.Mirror.Get(ctx, out.ReminderID); err == nil {
			item.DueAt, item.SentAt, item.Passed = row.DueAt, row.SentAt, !row.DueAt.After(decidedAt)
		}
		items = append(items, item)
	}
	return items
}

// resultPath shows a decision's result, after its POST's redirect.
const resultPath = Path + "decided"

// resultTTL is how long a result's address shows it; the audit trail
// keeps the decision for good.
const resultTTL = time.Hour

// maxResultURL bounds a result's address (an update of many reminders
// gets its result in the POST's answer instead).
const maxResultURL = 32 << 10

// resultToken is a decision's result, signed into the address the
// decision redirects to: what was decided, of what, when, and each
// reminder's outcome. The page reads the rest (due, sent) from the mirror.
type resultToken struct {
	Approve    bool              `json:"a,omitempty"`
	Tenant     string            `json:"n,omitempty"`
	ShipmentID string            `json:"s,omitempty"`
	UpdateID   string            `json:"u,omitempty"`
	ByLink     bool              `json:"l,omitempty"`
	At         int64             `json:"t"`
	Status     int               `json:"c"`
	Items      []starter.Outcome `json:"i"`
}

// resultURL is the address of tok's page, or false when it is too long.
func (c *console) resultURL(tok resultToken) (string, bool) {
	b, err := json.Marshal(tok)
	if err != nil {
		return "", false
	}
	enc := base64.RawURLEncoding.EncodeToString(b)
	target := resultPath + "?r=" + enc + "." + base64.RawURLEncoding.EncodeToString(c.results.Sign(enc))
	return target, len(target) <= maxResultURL
}

// decided shows a decision's result: GET, so a reload repeats nothing. A
// console decision's result is for a logged-in approver of its tenant; a
// link's for whoever holds the address, as the link was.
func (c *console) decided(w http.ResponseWriter, r *http.Request) {
	var tok resultToken
	enc, sig, _ := strings.Cut(r.URL.Query().Get("r"), ".")
	sum, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	ok := err == nil && c.results.Verify(enc, sum)
	if ok {
		b, err := base64.RawURLEncoding.Strict().DecodeString(enc)
		ok = err == nil && json.Unmarshal(b, &tok) == nil
	}
	if !ok {
		c.problem(w, r, http.StatusNotFound, "Not found", "This is not the address of a decision's result; nothing was changed.")
		return
	}
	at := time.Unix(tok.At, 0)
	if c.o.Now().After(at.Add(resultTTL)) {
		c.problem(w, r, http.StatusGone, "Result no longer shown",
			"This decision's result is shown for an hour after it is taken; nothing was changed. The reminder's audit trail keeps the decision.")
		return
	}
	approver := ""
	if !tok.ByLink {
		a, err := c.current(r)
		if err != nil {
			http.Redirect(w, r, Path+"login", http.StatusSeeOther)
			return
		}
		if c.tenantOf(a) != tok.Tenant {
			c.problem(w, r, http.StatusNotFound, "Not found", "This is not the address of a decision's result; nothing was changed.")
			return
		}
		approver = a.Name
	}
	d := resultData{Approve: tok.Approve, ByLink: tok.ByLink, ShipmentID: tok.ShipmentID, UpdateID: tok.UpdateID,
		Items: c.resultItems(r.Context(), tok.Items, at)}
	c.render(w, r, tok.Status, "result.html", page{Title: "Decision", Approver: approver, Data: d})
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

package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

type linkData struct {
	Claim   links.Claim
	Approve bool
	Row     mirror.Row
	// Decided is the decision that settled the reminder, for a used link.
	Decided *event
	// Action is where the confirmation form posts: the link itself.
	Action string
}

// checkLink verifies a link and reads its reminder, answering the clear
// page itself when the link cannot act: tampered (400), expired (410),
// for a reminder the mirror does not hold (404), or used: its reminder no
// longer awaits approval (409). ok is true for a link that can act.
func (c *console) checkLink(w http.ResponseWriter, r *http.Request) (d linkData, ok bool) {
	token := r.PathValue("token")
	claim, err := c.o.Links.Check(token)
	d = linkData{Claim: claim, Approve: claim.Decision == links.Approve, Action: links.Path + token}
	switch {
	case errors.Is(err, links.ErrExpired):
		c.render(w, r, http.StatusGone, "link-expired.html", page{Title: "Link expired", Data: d})
		return d, false
	case err != nil:
		c.log.Warn("console: invalid decision link")
		c.render(w, r, http.StatusBadRequest, "link-invalid.html", page{Title: "Link not valid"})
		return d, false
	}
	d.Row, err = c.o.Mirror.Get(r.Context(), claim.ReminderID)
	switch {
	case errors.Is(err, mirror.ErrNotFound):
		c.render(w, r, http.StatusNotFound, "link-invalid.html", page{Title: "Link not valid"})
		return d, false
	case err != nil:
		c.log.Error("console: reading a reminder failed", "reminder_id", claim.ReminderID, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; nothing was changed. Try again.")
		return d, false
	}
	if d.Row.State != reminder.AwaitingApproval {
		c.used(w, r, d)
		return d, false
	}
	return d, true
}

// used answers a link whose reminder no longer awaits approval: the link
// did its work already, or someone decided otherwise, or the reminder
// expired or was cancelled. It says which, and changes nothing.
func (c *console) used(w http.ResponseWriter, r *http.Request, d linkData) {
	if evs, err := c.o.Mirror.Events(r.Context(), d.Claim.ReminderID); err == nil {
		for _, e := range evs {
			if e.Type == "approved" || e.Type == "rejected" {
				ev := toEvent(e)
				d.Decided = &ev
			}
		}
	}
	c.render(w, r, http.StatusConflict, "link-used.html", page{Title: "Nothing left to do", Data: d})
}

// linkPage is what opening a link shows: a confirmation page whose button
// posts back to the link. A GET never decides, so a mail scanner
// prefetching the link changes nothing.
func (c *console) linkPage(w http.ResponseWriter, r *http.Request) {
	d, ok := c.checkLink(w, r)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "link.html", page{Title: "Confirm", Data: d})
}

// linkDecide takes the link's decision, once: a second POST finds the
// reminder decided and gets the used page.
func (c *console) linkDecide(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.problem(w, r, http.StatusBadRequest, "Bad request", "The form could not be read; nothing was changed.")
		return
	}
	d, ok := c.checkLink(w, r)
	if !ok {
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if err := checkReason(reason); err != nil {
		c.problem(w, r, http.StatusUnprocessableEntity, "Bad request", err.Error()+"; nothing was changed.")
		return
	}
	// A link is its reminder's capability, whichever tenant's it is.
	sel := starter.Selection{Tenant: reminder.TenantOf(d.Claim.ReminderID), ReminderID: d.Claim.ReminderID}
	c.take(w, r, LinkActor, sel, d.Approve, reason, true)
}

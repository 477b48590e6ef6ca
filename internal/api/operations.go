package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Results is POST /v1/updates' answer: one result per subscriber, in the
// update's order, as `shipnotify schedule` prints them.
type Results struct {
	Results []Result `json:"results"`
}

// Outcomes is an operation's answer: what it did to each reminder, as the
// CLI prints it. The request succeeded as a whole; each outcome's status
// says whether its reminder took the change (refused and failed among them).
type Outcomes struct {
	Outcomes []Outcome `json:"outcomes"`
}

// postUpdate schedules an update: 201 when this call started reminders, 200
// when every reminder was scheduled before (an identical resubmission, with
// the reminders as stored), 409 for other content under the same ids, 422
// for bad input; the last two write nothing. Webhook hosts are looked up
// only for an update that will be written, after every other check, and
// each one beyond the first costs the key a token (allowLookups).
func (a *API) postUpdate(w http.ResponseWriter, r *http.Request, c *caller) error {
	if p := requireJSON(r); p != nil {
		return p
	}
	u, err := reminder.ParseUpdate(r.Body)
	if err != nil {
		if p, ok := invalidUpdate(err); ok {
			return p
		}
		return bodyProblem(err)
	}
	u.Tenant, u.ScheduledBy = c.tenant, c.key.Name
	ctx := r.Context()
	d, err := a.st.Draft(ctx, u)
	if err != nil {
		if p, ok := invalidUpdate(err); ok {
			return p
		}
		if p, ok := updateChanged(err); ok {
			return p
		}
		return err
	}
	if p := a.chargeUpdate(c, d.Starts(), d.Lookups()); p != nil {
		return p
	}
	results, err := a.st.ScheduleDraft(ctx, d)
	if p, ok := invalidUpdate(err); ok {
		return p
	}
	if p, ok := updateChanged(err); ok {
		return p
	}
	results = slices.DeleteFunc(results, func(r starter.Result) bool { return r.ReminderID == "" })
	switch {
	case errors.Is(err, starter.ErrWorkflowIDTaken):
		p := typed(TypeWorkflowIDTaken, http.StatusConflict, "Workflow id held by another workflow",
			"the engine holds a workflow under a reminder's id that is not that reminder's (it started before the reminder was written: "+
				"an engine kept from before this mirror); those reminders, status conflict in results, were not started and stay unstarted "+
				"until that workflow is gone; the others are as results say")
		p.Results, p.cause = mapAll(results, ResultOf), err
		return p
	case errors.Is(err, starter.ErrSearchAttributesUnknown) && ctx.Err() == nil:
		// The operator's to fix, not the tracker's: say whose.
		p := typed(TypeIncomplete, http.StatusServiceUnavailable, "Update not completely scheduled",
			"the Temporal namespace does not know shipnotify's search attributes yet, so some reminders were not started: "+
				"its operator runs `shipnotify setup` (it waits until the server accepts them); what was written is kept, "+
				"and sending the same update again then completes it")
		p.Results, p.cause = mapAll(results, ResultOf), err
		return p
	case err != nil && ctx.Err() == nil:
		p := typed(TypeIncomplete, http.StatusServiceUnavailable, "Update not completely scheduled",
			"some reminders could not be written or started; what was written is kept, and sending the same update again completes it")
		p.Results, p.cause = mapAll(results, ResultOf), err
		return p
	case err != nil:
		return err
	}
	status := http.StatusOK
	if slices.ContainsFunc(results, func(r starter.Result) bool { return r.Status == starter.Scheduled }) {
		status = http.StatusCreated
	}
	writeJSON(w, status, Results{Results: mapAll(results, ResultOf)})
	return nil
}

// updateChanged is the 409 for a resubmission with other content; it
// wrote nothing.
func updateChanged(err error) (*Problem, bool) {
	var changed *starter.ChangedError
	if !errors.As(err, &changed) {
		return nil, false
	}
	p := typed(TypeUpdateChanged, http.StatusConflict, "Update already scheduled with other content",
		fmt.Sprintf("update %s/%s was already scheduled with different content (%s differ); nothing was written: "+
			"move a due time with the reschedule routes, or send new content under a new update_id",
			changed.ShipmentID, changed.UpdateID, strings.Join(changed.Fields, ", ")))
	p.Fields = changed.Fields
	return p, true
}

func (a *API) cancelShipment(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body actorBody
	if p := decodeBody(r, &body, true); p != nil {
		return p
	}
	who, p := actor(c.key, body.By, body.Reason)
	if p != nil {
		return p
	}
	shipment := r.PathValue("shipment")
	outs, err := a.st.Cancel(r.Context(), c.tenant, shipment, who)
	if errors.Is(err, starter.ErrUnknownShipment) {
		return problem(http.StatusNotFound, "the mirror has no reminders for this shipment")
	}
	return a.outcomes(w, r.Context(), outs, err)
}

func (a *API) rescheduleUpdate(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body rescheduleUpdateBody
	if p := decodeBody(r, &body, false); p != nil {
		return p
	}
	who, p := actor(c.key, body.By, body.Reason)
	if p != nil {
		return p
	}
	start, p := parseTime("window_start", body.WindowStart)
	if p != nil {
		return p
	}
	if p := outOfRange(reminder.CheckWindow("window_start", start, a.now())); p != nil {
		return p
	}
	outs, err := a.st.RescheduleUpdate(r.Context(), c.tenant, r.PathValue("shipment"), r.PathValue("update"), start, who)
	switch {
	case errors.Is(err, mirror.ErrNotFound):
		return problem(http.StatusNotFound, "the mirror has no such update")
	case errors.Is(err, starter.ErrNoWindow):
		return typed(TypeNoWindow, http.StatusConflict, "Update has no window", starter.ErrNoWindow.Error())
	}
	return a.outcomes(w, r.Context(), outs, err)
}

func (a *API) rescheduleReminder(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body rescheduleReminderBody
	if p := decodeBody(r, &body, false); p != nil {
		return p
	}
	who, p := actor(c.key, body.By, body.Reason)
	if p != nil {
		return p
	}
	due, p := parseTime("due_at", body.DueAt)
	if p != nil {
		return p
	}
	// Out of range is bad input, a 422 as on schedule, before any call.
	if p := outOfRange(reminder.CheckDue("due_at", due, a.now())); p != nil {
		return p
	}
	out, err := a.st.RescheduleReminder(r.Context(), c.tenant, reminderID(r, c), due, who)
	if errors.Is(err, mirror.ErrNotFound) {
		return problem(http.StatusNotFound, "the mirror has no such reminder")
	}
	return a.outcomes(w, r.Context(), []starter.Outcome{out}, err)
}

// outOfRange is the 422 for a time CheckDue or CheckWindow refused.
func outOfRange(err error) *Problem {
	var fe *reminder.FieldError
	if !errors.As(err, &fe) {
		return nil
	}
	return invalidRequest(fe.Field, "%s", fe.Problem)
}

// decideUpdate approves or rejects every reminder of an update that awaits
// approval.
func (a *API) decideUpdate(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		var body actorBody
		if p := decodeBody(r, &body, true); p != nil {
			return p
		}
		who, p := actor(c.key, body.By, body.Reason)
		if p != nil {
			return p
		}
		ctx := r.Context()
		shipment, update := r.PathValue("shipment"), r.PathValue("update")
		// An unknown update is 404; a known one with nothing to decide 409.
		if _, _, err := a.st.Mirror.Window(ctx, c.tenant, shipment, update); errors.Is(err, mirror.ErrNotFound) {
			return problem(http.StatusNotFound, "the mirror has no such update")
		} else if err != nil {
			return err
		}
		outs, err := a.st.Decide(ctx, starter.Selection{Tenant: c.tenant, ShipmentID: shipment, UpdateID: update}, approve, who)
		if errors.Is(err, starter.ErrNothingToDecide) {
			return typed(TypeNothingToDecide, http.StatusConflict, "Nothing awaits approval", starter.ErrNothingToDecide.Error())
		}
		return a.outcomes(w, ctx, outs, err)
	}
}

// decideReminder approves or rejects one reminder; one that does not await
// approval answers 200 with a refused outcome saying why, as the CLI does.
func (a *API) decideReminder(approve bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		var body actorBody
		if p := decodeBody(r, &body, true); p != nil {
			return p
		}
		who, p := actor(c.key, body.By, body.Reason)
		if p != nil {
			return p
		}
		outs, err := a.st.Decide(r.Context(), starter.Selection{Tenant: c.tenant, ReminderID: reminderID(r, c)}, approve, who)
		if errors.Is(err, mirror.ErrNotFound) {
			return problem(http.StatusNotFound, "the mirror has no such reminder")
		}
		return a.outcomes(w, r.Context(), outs, err)
	}
}

// outcomes answers an operation: 200 with every outcome, or, when some
// reminders did not finish it, a problem carrying every outcome: 504 when
// a workflow accepted the change and had not finished it (unfinished: it
// lands), when a workflow did not take it in time (no-answer: nothing
// changed for it, nor can later) or the request ran out of time, 503
// otherwise. Operations are safe to repeat.
func (a *API) outcomes(w http.ResponseWriter, ctx context.Context, outs []starter.Outcome, err error) error {
	outs = slices.DeleteFunc(outs, func(o starter.Outcome) bool { return o.ReminderID == "" })
	if err == nil {
		writeJSON(w, http.StatusOK, Outcomes{Outcomes: mapAll(outs, OutcomeOf)})
		return nil
	}
	var p *Problem
	switch {
	case errors.Is(err, starter.ErrAccepted):
		// First: a reminder that will still change must not read as one
		// that did not.
		p = typed(TypeUnfinished, http.StatusGatewayTimeout, "A change is not finished yet",
			"a reminder's workflow accepted the change and had not finished it in time (a worker stalled, or the mirror is slow): "+
				"it lands, in the mirror and the workflow alike, unless the reminder finishes first; outcomes says which reminders "+
				"(accepted) and which did not take it (no_answer: nothing changed for them); reading a reminder shows where it stands, "+
				"and repeating the request is safe")
	case errors.Is(err, starter.ErrNoAnswer):
		p = typed(TypeNoAnswer, http.StatusGatewayTimeout, "A reminder did not answer", starter.ErrNoAnswer.Error())
	case ctx.Err() != nil:
		p = problem(http.StatusGatewayTimeout,
			"the request took longer than the server's request timeout; outcomes lists the reminders reached, and repeating the request is safe")
	default:
		p = typed(TypeIncomplete, http.StatusServiceUnavailable, "Operation not completed",
			fmt.Sprintf("%d %s reached (in outcomes); the others failed, and the server's log says why; repeating the request is safe",
				len(outs), map[bool]string{true: "reminder", false: "reminders"}[len(outs) == 1]))
	}
	p.Outcomes, p.cause = mapAll(outs, OutcomeOf), err
	return p
}

// reminderID is the reminder a path names by its three ids, of the
// caller's tenant.
func reminderID(r *http.Request, c *caller) string {
	return reminder.ID(c.tenant, r.PathValue("shipment"), r.PathValue("update"), r.PathValue("subscriber"))
}

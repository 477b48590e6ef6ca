package api

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// Page sizes of GET /v1/reminders.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// Page is a page of reminders in (due_at, id) order. NextCursor, absent on
// the last page, fetches the next one with the same filters.
type Page struct {
	Reminders  []Reminder `json:"reminders"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// cursor is the position after the last row of a page. It travels opaque
// (base64url of this JSON) so clients do not build one, and the server may
// change its content.
type cursor struct {
	DueAt time.Time `json:"d"`
	ID    string    `json:"i"`
}

func (c cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, false
	}
	var c cursor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.ID == "" || c.DueAt.IsZero() {
		return cursor{}, false
	}
	return c, true
}

var listParams = []string{"shipment", "update", "state", "due_from", "due_to", "goes_out_from", "goes_out_to",
	"digest_key", "cursor", "limit", "tenant", "updated_since"}

// changeParams are the parameters the change feed takes beside
// updated_since: the others select by what a reminder is, not by when it
// changed, and would leave holes in the feed.
var changeParams = []string{"updated_since", "limit", "tenant"}

// listReminders answers GET /v1/reminders: by shipment (and update), by
// state, due between two times, going out between two times (what is owed
// on a day: a send window moves when a reminder goes out, never when it is
// due), by the digest they went out in, a page at a time. Unknown or
// repeated parameters are refused, so a misspelt filter never returns
// everything.
func (a *API) listReminders(w http.ResponseWriter, r *http.Request, c *caller) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return typed(TypeInvalidParameter, http.StatusBadRequest, "Invalid parameter", "the query string is malformed")
	}
	for name, vs := range q {
		if !slices.Contains(listParams, name) {
			return invalidParameter(name, "unknown parameter")
		}
		if len(vs) > 1 {
			return invalidParameter(name, "given more than once")
		}
	}
	if q.Has("updated_since") {
		return a.listChanges(w, r, c, q)
	}
	f := mirror.Filter{Tenant: c.tenant, AnyTenant: c.anyTenant(), ShipmentID: q.Get("shipment"), UpdateID: q.Get("update"), Limit: DefaultPageSize}
	for _, name := range []string{"shipment", "update"} {
		if v := q.Get(name); v != "" && !reminder.IsID(v) {
			return invalidParameter(name, "not an id (letters, digits, '.', '_', '-', at most 64)")
		}
	}
	if s := q.Get("state"); s != "" {
		if !slices.Contains(mirror.FilterStates, reminder.State(s)) {
			return invalidParameter("state", "want "+mirror.FilterStatesText())
		}
		f.State = reminder.State(s)
	}
	var p *Problem
	if f.DueFrom, p = parseWhen("due_from", q.Get("due_from")); p != nil {
		return p
	}
	if f.DueTo, p = parseWhen("due_to", q.Get("due_to")); p != nil {
		return p
	}
	if !f.DueFrom.IsZero() && !f.DueTo.IsZero() && !f.DueTo.After(f.DueFrom) {
		return invalidParameter("due_to", "must be after due_from")
	}
	if f.GoesOutFrom, p = parseWhen("goes_out_from", q.Get("goes_out_from")); p != nil {
		return p
	}
	if f.GoesOutTo, p = parseWhen("goes_out_to", q.Get("goes_out_to")); p != nil {
		return p
	}
	if !f.GoesOutFrom.IsZero() && !f.GoesOutTo.IsZero() && !f.GoesOutTo.After(f.GoesOutFrom) {
		return invalidParameter("goes_out_to", "must be after goes_out_from")
	}
	if k := q.Get("digest_key"); k != "" {
		if !reminder.IsDigestKey(k) {
			return invalidParameter("digest_key", "not a digest's key ("+reminder.DigestKeyPrefix+" and 64 lowercase hex digits)")
		}
		f.DigestKey = k
	}
	if f.Limit, p = parseLimit(q.Get("limit")); p != nil {
		return p
	}
	if s := q.Get("cursor"); s != "" {
		c, ok := parseCursor(s)
		if !ok {
			return invalidParameter("cursor", "not a cursor this API gave out")
		}
		f.AfterDueAt, f.AfterID = c.DueAt, c.ID
	}
	var page Page
	rows, next, err := onePage(f.Limit, func(limit int) ([]mirror.Row, error) {
		f.Limit = limit
		return a.st.Mirror.List(r.Context(), f)
	}, func(last mirror.Row) string { return cursor{DueAt: last.DueAt, ID: last.ID}.String() })
	if err != nil {
		return err
	}
	page.NextCursor = next
	page.Reminders = RemindersOf(rows, a.ids)
	if page.Reminders == nil {
		page.Reminders = []Reminder{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// onePage fetches one row more than a page of size holds: the extra row
// says whether another page follows, and the page's last row names the
// cursor to it (next is "" on the last page).
func onePage[T any](size int, fetch func(limit int) ([]T, error), cursorOf func(last T) string) (rows []T, next string, err error) {
	rows, err = fetch(size + 1)
	if err != nil || len(rows) <= size {
		return rows, "", err
	}
	rows = rows[:size]
	return rows, cursorOf(rows[size-1]), nil
}

// parseLimit reads a page size (DefaultPageSize when absent).
func parseLimit(s string) (int, *Problem) {
	if s == "" {
		return DefaultPageSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, invalidParameter("limit", fmt.Sprintf("want a number from 1 to %d", MaxPageSize))
	}
	return n, nil
}

// The two places a feed may start from without a cursor.
const (
	// ChangesFromStart is every reminder that changed since the feed began
	// (migration 00023; one not changed since enters it at its next
	// change), in the order of its latest change.
	ChangesFromStart = "0"
	// ChangesFromNow is only the changes still to come.
	ChangesFromNow = "now"
)

// changeCursorPurpose binds a sealed feed position to the feed.
const changeCursorPurpose = "shipnotify/changes/v1"

// changeCursor is a place in the change feed (mirror.Position), sealed:
// the position is a cluster-wide transaction id and trail event id, which
// would count every tenant's changes, so the caller gets it encrypted and
// authenticated (opaque.Keys.Seal), and cannot read, order or forge one.
func (a *API) changeCursor(p mirror.Position) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], p.Xact)
	binary.BigEndian.PutUint64(b[8:], uint64(p.Event))
	return a.ids.Seal(changeCursorPurpose, b[:])
}

// parseChangeCursor reads updated_since: a cursor this API gave out, or
// ChangesFromStart; now is the caller's to resolve.
func (a *API) parseChangeCursor(s string) (mirror.Position, bool) {
	if s == ChangesFromStart {
		return mirror.Position{}, true
	}
	b, ok := a.ids.Open(changeCursorPurpose, s)
	if !ok || len(b) != 16 {
		return mirror.Position{}, false
	}
	p := mirror.Position{Xact: binary.BigEndian.Uint64(b[:8]), Event: int64(binary.BigEndian.Uint64(b[8:]))}
	if p.Xact == 0 {
		return mirror.Position{}, false
	}
	return p, true
}

// listChanges answers GET /v1/reminders?updated_since=: the reminders
// whose state changed after the cursor (each status event is a change),
// in the order of their latest change, a page at a time. next_cursor is
// always given: the next page, or, on a page shorter than limit, where to
// poll from. A reminder that changes again comes again, later in the
// feed, in its new state, with last_change saying what changed.
func (a *API) listChanges(w http.ResponseWriter, r *http.Request, c *caller, q url.Values) error {
	for name := range q {
		if !slices.Contains(changeParams, name) {
			return invalidParameter(name, "not with updated_since (the change feed takes limit and tenant only)")
		}
	}
	f := mirror.ChangeFilter{Tenant: c.tenant, AnyTenant: c.anyTenant()}
	var p *Problem
	if f.Limit, p = parseLimit(q.Get("limit")); p != nil {
		return p
	}
	since := q.Get("updated_since")
	if since == ChangesFromNow {
		head, err := a.st.Mirror.ChangesHead(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, Page{Reminders: []Reminder{}, NextCursor: a.changeCursor(head)})
		return nil
	}
	var ok bool
	if f.After, ok = a.parseChangeCursor(since); !ok {
		return invalidParameter("updated_since", "not a cursor this API gave out (or 0 for the start, now for what is to come)")
	}
	rows, last, err := a.st.Mirror.Changes(r.Context(), f)
	if err != nil {
		return err
	}
	page := Page{Reminders: RemindersOf(rows, a.ids)}
	if page.Reminders == nil {
		page.Reminders = []Reminder{}
	}
	next := a.changeCursor(last)
	if last == (mirror.Position{}) {
		next = ChangesFromStart
	}
	page.NextCursor = next
	writeJSON(w, http.StatusOK, page)
	return nil
}

// parseWhen reads an RFC 3339 time, or a date for its UTC midnight (as
// `shipnotify list` does).
func parseWhen(name, s string) (time.Time, *Problem) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, invalidParameter(name, "not an RFC 3339 time or a YYYY-MM-DD date")
}

// ReminderView is GET one reminder's answer: the mirror's row and audit
// trail, what Temporal says of its workflow, and the running workflow's own
// account (its status query), as `shipnotify show --json` prints them.
type ReminderView struct {
	Reminder Reminder     `json:"reminder"`
	Events   []Event      `json:"events"`
	Workflow WorkflowView `json:"workflow"`
	Live     *LiveStatus  `json:"live,omitempty"`
	// LiveError says why a running workflow's status is missing (it did
	// not answer within StatusQueryTimeout: is a worker running?).
	LiveError string `json:"live_error,omitempty"`
}

// WorkflowView is what Temporal says of a reminder's workflow.
type WorkflowView struct {
	// Status is running, completed, failed, canceled, terminated,
	// continued_as_new, timed_out, or not_found (retention removed it, or
	// it never started).
	Status        string     `json:"status"`
	RunID         string     `json:"run_id,omitempty"`
	StartTime     *time.Time `json:"start_time,omitempty"`
	CloseTime     *time.Time `json:"close_time,omitempty"`
	HistoryLength int64      `json:"history_length,omitempty"`
}

// LiveStatus is workflows.Status in the API's spelling.
type LiveStatus struct {
	State reminder.State `json:"state"`
	DueAt time.Time      `json:"due_at"`
	// GoesOutAt is when the workflow will send it in its send window,
	// once it has worked that out (absent without a window).
	GoesOutAt       *time.Time   `json:"goes_out_at,omitempty"`
	DeliveryKey     string       `json:"delivery_key"`
	Approval        LiveApproval `json:"approval"`
	CancelRequested bool         `json:"cancel_requested"`
	Reschedules     int          `json:"reschedules"`
	// Transitions are the latest steps; TransitionCount counts them all
	// (the events keep every one).
	Transitions     []LiveTransition `json:"transitions"`
	TransitionCount int              `json:"transition_count"`
	// WaitingUntil is set while the engine holds the workflow in its start
	// delay: no worker has run it, so this account is what its start
	// recorded, and the engine runs it at this time (its due time).
	WaitingUntil *time.Time `json:"waiting_until,omitempty"`
}

// LiveApproval is where a reminder stands on approval.
type LiveApproval struct {
	Required  bool          `json:"required"`
	TimeoutAt *time.Time    `json:"timeout_at,omitempty"`
	ExpiresAt *time.Time    `json:"expires_at,omitempty"`
	Escalated bool          `json:"escalated"`
	Decision  *LiveDecision `json:"decision,omitempty"`
}

// LiveDecision is a decision as taken.
type LiveDecision struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	// Key is the credential that decided; by is the caller's words.
	Key string `json:"key,omitempty"`
}

// LiveTransition is one step of a reminder's life.
type LiveTransition struct {
	At     time.Time      `json:"at"`
	Event  string         `json:"event"`
	State  reminder.State `json:"state"`
	Detail string         `json:"detail,omitempty"`
}

func (a *API) getReminder(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	id := reminderID(r, c)
	row, err := a.st.Mirror.Get(ctx, id)
	if errors.Is(err, mirror.ErrNotFound) {
		return problem(http.StatusNotFound, "the mirror has no such reminder")
	}
	if err != nil {
		return err
	}
	events, err := a.st.Mirror.Events(ctx, id)
	if err != nil {
		return err
	}
	view := ReminderView{Reminder: ReminderOf(row, a.ids), Events: EventsOf(events, a.ids)}
	if view.Events == nil {
		view.Events = []Event{}
	}
	desc, err := a.st.Temporal.DescribeWorkflowExecution(ctx, row.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		view.Workflow.Status = "not_found"
	case err != nil:
		return fmt.Errorf("error describing workflow: %w", err)
	default:
		info := desc.GetWorkflowExecutionInfo()
		view.Workflow = WorkflowView{
			Status:        workflowStatus(info.GetStatus()),
			RunID:         info.GetExecution().GetRunId(),
			HistoryLength: info.GetHistoryLength(),
		}
		if t := info.GetStartTime(); t != nil {
			view.Workflow.StartTime = ptr(t.AsTime())
		}
		if t := info.GetCloseTime(); t != nil {
			view.Workflow.CloseTime = ptr(t.AsTime())
		}
		if info.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			view.Live, err = a.liveStatus(ctx, row, info)
			if err != nil {
				view.LiveError = "the workflow did not answer its status query (is a worker running?)"
				a.log.WarnContext(ctx, "status query failed", "workflow_id", row.WorkflowID, "error", err)
			}
		}
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// liveStatus asks a running workflow for its own account, for at most
// StatusQueryTimeout.
func (a *API) liveStatus(ctx context.Context, row mirror.Row, info *workflowpb.WorkflowExecutionInfo) (*LiveStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, StatusQueryTimeout)
	defer cancel()
	s, err := starter.LiveStatus(ctx, a.st.Temporal, row, info)
	if err != nil {
		return nil, err
	}
	live := &LiveStatus{
		State: s.State, DueAt: s.DueAt, DeliveryKey: s.DeliveryKey, CancelRequested: s.CancelRequested,
		Reschedules: s.Reschedules, TransitionCount: s.TransitionCount, Transitions: []LiveTransition{},
		Approval: LiveApproval{Required: s.Approval.Required, Escalated: s.Approval.Escalated},
	}
	if !s.Approval.TimeoutAt.IsZero() {
		live.Approval.TimeoutAt = ptr(s.Approval.TimeoutAt)
	}
	if !s.Approval.ExpiresAt.IsZero() {
		live.Approval.ExpiresAt = ptr(s.Approval.ExpiresAt)
	}
	if !s.WaitingUntil.IsZero() {
		live.WaitingUntil = ptr(s.WaitingUntil)
	}
	if !s.GoesOutAt.IsZero() {
		live.GoesOutAt = ptr(goesOutAt(s.GoesOutAt, s.DueAt))
	}
	if d := s.Approval.Decision; d != nil {
		live.Approval.Decision = &LiveDecision{Approved: d.Approved, By: d.By, Reason: d.Reason, At: d.At, Key: d.Key}
	}
	for _, t := range s.Transitions {
		live.Transitions = append(live.Transitions, LiveTransition{At: t.At, Event: t.Event, State: t.State, Detail: t.Detail})
	}
	return live, nil
}

// workflowStatus spells an execution status as the API does.
func workflowStatus(s enums.WorkflowExecutionStatus) string {
	switch s {
	case enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return "running"
	case enums.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed"
	case enums.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed"
	case enums.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "canceled"
	case enums.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "terminated"
	case enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "continued_as_new"
	case enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed_out"
	}
	return "unknown"
}

func ptr[T any](v T) *T { return &v }

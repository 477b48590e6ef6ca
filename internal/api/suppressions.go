package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// suppressionParams are the query parameters GET /v1/suppressions takes
// beside tenant.
var suppressionParams = []string{"lifted", "limit", "cursor"}

// SuppressionPage is a page of suppressions, newest first. NextCursor,
// absent on the last page, fetches the next one with the same filters.
type SuppressionPage struct {
	Suppressions []Suppression `json:"suppressions"`
	NextCursor   string        `json:"next_cursor,omitempty"`
}

// Lift statuses: this call lifted the suppression, or it was lifted
// before (a retry whose answer was lost reads as done).
const (
	Lifted        = "lifted"
	AlreadyLifted = "already_lifted"
)

// LiftResult is POST /v1/suppressions/lift's answer: what became of the
// suppression, and the suppression as it now stands.
type LiftResult struct {
	Status      string      `json:"status"`
	Suppression Suppression `json:"suppression"`
}

// liftBody is what a lift takes: the address, and who asks and why.
type liftBody struct {
	Address string `json:"address"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
}

// suppressionCursor is a place in the suppressions' order, opaque as the
// reminders' cursor is.
type suppressionCursor struct {
	At     time.Time `json:"a"`
	Tenant string    `json:"t"`
	Hash   string    `json:"h"`
}

func (c suppressionCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseSuppressionCursor(s string) (*mirror.SuppressionPosition, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	var c suppressionCursor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.At.IsZero() || c.Hash == "" {
		return nil, false
	}
	return &mirror.SuppressionPosition{SuppressedAt: c.At, Tenant: c.Tenant, AddressSHA256: c.Hash}, true
}

// listSuppressions answers GET /v1/suppressions: the addresses that opted
// out of the caller's tenant's mail (every tenant's for an admin naming
// none), newest first, a page at a time; lifted ones too with lifted=true.
// An address is never shown, only its SHA-256 (of the address trimmed and
// lower-cased), as the mirror keeps it.
func (a *API) listSuppressions(w http.ResponseWriter, r *http.Request, c *caller) error {
	q, _ := url.ParseQuery(r.URL.RawQuery) // checkQuery parsed it
	f := mirror.SuppressionFilter{Tenant: c.tenant, AnyTenant: c.anyTenant()}
	switch q.Get("lifted") {
	case "", "false":
	case "true":
		f.Lifted = true
	default:
		return invalidParameter("lifted", "want true or false")
	}
	var p *Problem
	if f.Limit, p = parseLimit(q.Get("limit")); p != nil {
		return p
	}
	if s := q.Get("cursor"); s != "" {
		var ok bool
		if f.After, ok = parseSuppressionCursor(s); !ok {
			return invalidParameter("cursor", "not a cursor this API gave out")
		}
	}
	var page SuppressionPage
	rows, next, err := onePage(f.Limit, func(limit int) ([]mirror.Suppression, error) {
		f.Limit = limit
		return a.st.Mirror.Suppressions(r.Context(), f)
	}, func(last mirror.Suppression) string {
		return suppressionCursor{At: last.SuppressedAt, Tenant: last.Tenant, Hash: last.AddressSHA256}.String()
	})
	if err != nil {
		return err
	}
	page.NextCursor = next
	page.Suppressions = make([]Suppression, len(rows))
	for i, s := range rows {
		page.Suppressions[i] = SuppressionOf(s, reminder.TenantName(s.Tenant, a.defaultTenant))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// liftSuppression answers POST /v1/suppressions/lift: it lifts the
// caller's tenant's suppression of an address, as `shipnotify
// suppressions remove` does, so the address's next reminder is sent. The
// row stays, lifted, with who lifted it and why (lifted_by: the caller's
// words, the key's name, the reason). Another tenant's suppression of the
// same address is never touched: for this tenant that address is not
// suppressed (404). The address travels in the body, never the URL, so no
// proxy's log keeps it.
func (a *API) liftSuppression(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body liftBody
	if p := decodeBody(r, &body, false); p != nil {
		return p
	}
	if err := reminder.CheckEmail("address", body.Address); err != nil {
		var fe *reminder.FieldError
		if errors.As(err, &fe) {
			return invalidRequest(fe.Field, "%s", fe.Problem)
		}
		return invalidRequest("address", "is not a valid email address")
	}
	who, p := actor(c.key, body.By, body.Reason)
	if p != nil {
		return p
	}
	ctx := r.Context()
	// Twice at most: an address found neither suppressed nor lifted may
	// have been suppressed again between the two statements, by a new
	// opt-out, and that one is what the caller asked to lift.
	for range 2 {
		status := Lifted
		err := a.st.Mirror.LiftSuppression(ctx, c.tenant, body.Address, liftedBy(who.By, who.Key, who.Reason))
		if errors.Is(err, mirror.ErrNotSuppressed) {
			status, err = AlreadyLifted, nil
		}
		if err != nil {
			return err
		}
		rows, err := a.st.Mirror.Suppressions(ctx, mirror.SuppressionFilter{Tenant: c.tenant, Address: body.Address, Lifted: true, Limit: 1})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return problem(http.StatusNotFound, "the address is not suppressed for this tenant")
		}
		if status == AlreadyLifted && rows[0].LiftedAt == nil {
			continue
		}
		if status == Lifted {
			a.log.InfoContext(ctx, "suppression lifted", "tenant", reminder.TenantName(c.tenant, a.defaultTenant), "key", who.Key, "by", who.By)
		}
		// Lifted by this call, the row is as it stands now (a new opt-out
		// may have suppressed it again since: then lifted_at is absent).
		row := SuppressionOf(rows[0], reminder.TenantName(rows[0].Tenant, a.defaultTenant))
		writeJSON(w, http.StatusOK, LiftResult{Status: status, Suppression: row})
		return nil
	}
	return problem(http.StatusConflict, "the address was suppressed again while it was being lifted; send the request again")
}

// liftedBy is the suppression's lifted_by for a lift through the API: as
// the CLI writes it (who, then ": reason" when given), with the key's
// name beside who, in a parenthesis of its own at the end of who.
func liftedBy(by, key, reason string) string {
	s := fmt.Sprintf("%s (API key %s)", by, key)
	if reason != "" {
		s += ": " + reason
	}
	return s
}

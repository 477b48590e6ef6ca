// Package unsubscribe takes the one-click unsubscribes (RFC 8058) of
// reminder emails on serve: a POST of "List-Unsubscribe=One-Click" to the
// signed link in the email's List-Unsubscribe header suppresses the
// reminder's address for its tenant, as SendGrid's unsubscribe event does.
// A GET only shows a page with the button that posts it: link scanners
// and previews open links, and must not unsubscribe anyone. A link ends
// after links.UnsubscribeTTL, and a lift of the address's suppression
// outranks every link made before it.
package unsubscribe

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/mirror"
)

// Path is where the handler is mounted.
const Path = links.UnsubscribePath

// Store records a suppression by the reminder a link names, unless a lift
// since the link was issued outranks it (mirror.Store is the product's).
type Store interface {
	SuppressAddressByLink(ctx context.Context, reminderID string, issued time.Time) (mirror.LinkSuppression, error)
}

// Handler answers Path + token.
type Handler struct {
	keys   links.Keys
	store  Store
	logger *slog.Logger
}

// New returns a handler checking tokens with keys (SHIPNOTIFY_LINK_KEY,
// which the worker signs with).
func New(keys links.Keys, store Store, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{keys: keys, store: store, logger: logger}
}

// maxBody bounds a POST's body: RFC 8058's is one short form field.
const maxBody = 1 << 10

// oneClick is the form field and value RFC 8058's POST carries.
const oneClick, oneClickValue = "List-Unsubscribe", "One-Click"

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, ok := strings.CutPrefix(r.URL.Path, Path)
	if !ok || token == "" || strings.Contains(token, "/") {
		http.NotFound(w, r)
		return
	}
	claim, err := h.keys.CheckUnsubscribe(token, time.Now())
	switch {
	case errors.Is(err, links.ErrExpired):
		outOfDate(w, "It was sent more than 90 days ago.")
		return
	case err != nil:
		page(w, http.StatusNotFound, "This unsubscribe link is not valid", "", "")
		return
	}
	id := claim.ReminderID
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		page(w, http.StatusOK, "Unsubscribe from these reminders?",
			"Press the button to stop this sender's shipment reminders to your address.", r.URL.Path)
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := parseForm(r); err != nil || r.PostForm.Get(oneClick) != oneClickValue {
			page(w, http.StatusBadRequest, "This unsubscribe request is not valid",
				"An unsubscribe posts List-Unsubscribe=One-Click.", "")
			return
		}
		res, err := h.store.SuppressAddressByLink(r.Context(), id, claim.Issued)
		if err != nil {
			h.logger.Error("unsubscribe failed", "reminder_id", id, "error", err)
			page(w, http.StatusServiceUnavailable, "The unsubscribe could not be recorded", "Please try again in a minute.", "")
			return
		}
		switch res {
		case mirror.LinkNoReminder:
			page(w, http.StatusNotFound, "This unsubscribe link is no longer valid", "", "")
			return
		case mirror.LinkOutranked:
			h.logger.Info("one-click link outranked by a later lift", "reminder_id", id)
			outOfDate(w, "The sender was asked to send you reminders again after it was sent.")
			return
		}
		h.logger.Info("unsubscribed by one-click link", "reminder_id", id)
		page(w, http.StatusOK, "You are unsubscribed", "This sender's shipment reminders will no longer be sent to your address.", "")
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// outOfDate answers a link that is authentic but ended (410 Gone): it
// suppresses nothing, and the unsubscribe link of a newer reminder works.
func outOfDate(w http.ResponseWriter, why string) {
	page(w, http.StatusGone, "This unsubscribe link is out of date",
		why+" Use the unsubscribe link in a newer reminder from this sender.", "")
}

// parseForm reads the POST's form in either encoding RFC 8058 allows.
func parseForm(r *http.Request) error {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		return r.ParseMultipartForm(maxBody)
	}
	return r.ParseForm()
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color-scheme:light dark}</style>
</head><body><h1>{{.Title}}</h1>{{with .Text}}<p>{{.}}</p>{{end}}
{{with .Action}}<form method="post" action="{{.}}"><input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button></form>{{end}}
</body></html>
`))

// page answers a small HTML page; action, when set, is the form's target.
func page(w http.ResponseWriter, status int, title, text, action string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, struct{ Title, Text, Action string }{title, text, action})
}

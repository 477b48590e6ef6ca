package console

import (
	"net/http"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// digestPath is where a digest's page lives, its key after it.
const digestPath = "/console/digests/"

// inDigest says a reminder's digest on its pages: "in a digest every
// 30m" ("" for one that goes out alone).
func inDigest(every time.Duration) string {
	if every <= 0 {
		return ""
	}
	return "in a digest every " + reminder.DigestEvery(every)
}

// digestData is a digest's page: the one message its members went out
// in, and each member.
type digestData struct {
	// Key is the digest's key; Short its first hex digits, for headings.
	Key, Short string
	// Every is the interval ("30m"); GoesOutAt the boundary it went out
	// at; Channel and Recipient (masked) the one address it went to.
	Every     string
	GoesOutAt time.Time
	Channel   reminder.Channel
	Recipient string
	// SentAt is when it was recorded sent (nil while its send is under
	// way, or when it failed: the members' states say).
	SentAt *time.Time
	Rows   []listed
}

// digest shows one of the tenant's digests: its members, due first, each
// linked to its page. A key that is no digest's, or names another
// tenant's, is not found, as one that does not exist.
func (c *console) digest(w http.ResponseWriter, r *http.Request, a Approver) {
	key := r.PathValue("key")
	notFound := func() { c.problem(w, r, http.StatusNotFound, "Not found", "The mirror has no such digest.") }
	if !reminder.IsDigestKey(key) {
		// Names nothing; never asked of the mirror.
		notFound()
		return
	}
	tenant := c.tenantOf(a)
	ctx := r.Context()
	// A digest holds at most MaxDigestMembers: one page, no paging.
	rows, err := c.o.Mirror.List(ctx, mirror.Filter{Tenant: tenant, DigestKey: key, Limit: reminder.MaxDigestMembers})
	var contexts map[string]mirror.ApprovalContext
	if err == nil && len(rows) > 0 {
		ids := make([]string, len(rows))
		for i, row := range rows {
			ids[i] = row.ID
		}
		contexts, err = c.o.Mirror.ApprovalContexts(ctx, tenant, ids)
	}
	if err != nil {
		c.log.Error("console: reading a digest failed", "digest_key", key, "error", err)
		c.problem(w, r, http.StatusServiceUnavailable, "Unavailable", "The mirror could not be read; try again.")
		return
	}
	if len(rows) == 0 {
		notFound()
		return
	}
	now := c.o.Now()
	first := rows[0]
	d := digestData{Key: key, Short: key[:len(reminder.DigestKeyPrefix)+12] + "…", Every: reminder.DigestEvery(first.Digest), GoesOutAt: first.GoesOutAt, Channel: first.Channel,
		Recipient: maskRecipient(first.Channel, contexts[first.ID].Recipient), Rows: make([]listed, len(rows))}
	for i, row := range rows {
		d.Rows[i] = c.listed(row, contexts[row.ID], now)
		if d.SentAt == nil && row.SentAt != nil {
			d.SentAt = row.SentAt
		}
	}
	c.render(w, r, http.StatusOK, "digest.html", page{Title: "Digest " + d.Short, Approver: a.Name, Data: d})
}

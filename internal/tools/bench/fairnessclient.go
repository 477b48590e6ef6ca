package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/shipnotify/shipnotify/reminder"
)

// tenantClient is one tenant's tracker: its key, the API, and the prefix
// its shipments' ids start with.
type tenantClient struct {
	name, key, url, prefix string
	http                   *http.Client
}

// postedUpdate is an update a tenant posts: its ids, its window and its
// subscribers, each due remindBefore ahead of the window.
type postedUpdate struct {
	shipment, update string
	window           time.Time
	subscribers      []string
	// done is closed once its schedule has ended, ok when it was taken:
	// a move waits for it, or a schedule still being retried would meet
	// its own moved window (409).
	done chan struct{}
	ok   bool
}

// remindBefore puts a reminder ahead of its window, so moving the window
// moves it.
const remindBefore = time.Hour

// maxAttempts bounds a request's retries: enough to ride out a long
// stretch of 429s or a restart, not a dead server.
const maxAttempts = 50

// update is the tenant's seq-th update, of size subscribers due at due.
func (c *tenantClient) update(seq, size int, due time.Time) *postedUpdate {
	// To the microsecond, as the mirror keeps it: a repeat after a 503 or
	// 504 is then the same update, not one whose window differs.
	u := &postedUpdate{shipment: fmt.Sprintf("%s%06d", c.prefix, seq), update: "u",
		window: reminder.NormalizeTime(due.Add(remindBefore)), done: make(chan struct{})}
	for i := range size {
		u.subscribers = append(u.subscribers, fmt.Sprintf("s%04d", i))
	}
	return u
}

// document is the update as the tracker sends it.
func (u *postedUpdate) document() map[string]any {
	subs := make([]map[string]any, len(u.subscribers))
	for i, s := range u.subscribers {
		subs[i] = map[string]any{"id": s, "channel": "email", "email": s + "@bench.example", "remind_before": remindBefore.String()}
	}
	return map[string]any{
		"shipment_id": u.shipment, "update_id": u.update, "kind": "delivery_window",
		"window_start": u.window.UTC().Format(time.RFC3339Nano),
		"message":      map[string]any{"subject": "Delivery window opens soon", "text": "Benchmark reminder."},
		"subscribers":  subs,
	}
}

// requestResult is what one request met: when it was first sent, how long
// until it was done, every status answered, and the outcome of a move.
type requestResult struct {
	at       time.Time
	took     time.Duration
	statuses []int
	outcome  string
	err      error
}

// schedule posts the update until the API takes it (201, or 200 for one
// it holds already).
func (c *tenantClient) schedule(ctx context.Context, u *postedUpdate) requestResult {
	defer close(u.done)
	r := c.do(ctx, "/v1/updates", u.document(), func(status int, _ []byte) (bool, string) {
		return status == http.StatusCreated || status == http.StatusOK, ""
	})
	u.ok = r.err == nil
	return r
}

// move moves the update's window by, and its outcome is its reminders'
// outcomes' first status ("rescheduled", or why not).
func (c *tenantClient) move(ctx context.Context, u *postedUpdate, by time.Duration) requestResult {
	window := u.window.Add(by)
	path := "/v1/shipments/" + u.shipment + "/updates/" + u.update + "/reschedule"
	return c.do(ctx, path, map[string]any{"window_start": window.UTC().Format(time.RFC3339Nano)}, func(status int, body []byte) (bool, string) {
		if status != http.StatusOK {
			return false, ""
		}
		var out struct {
			Outcomes []struct {
				Status string `json:"status"`
			} `json:"outcomes"`
		}
		if json.Unmarshal(body, &out) != nil || len(out.Outcomes) == 0 {
			return true, "unreadable"
		}
		return true, out.Outcomes[0].Status
	})
}

// do posts body to path until done says the answer is the one wanted:
// after a 429 it waits as Retry-After says, after a 503 or 504 (a part
// that failed part way; the request is safe to repeat) or a broken
// connection a second; any other answer is final.
func (c *tenantClient) do(ctx context.Context, path string, body any, done func(status int, body []byte) (bool, string)) requestResult {
	doc, err := json.Marshal(body)
	if err != nil {
		return requestResult{at: time.Now(), err: err}
	}
	r := requestResult{at: time.Now()}
	defer func() { r.took = time.Since(r.at) }()
	for attempt := 1; ; attempt++ {
		status, answer, wait, err := c.post(ctx, path, doc)
		if err == nil {
			r.statuses = append(r.statuses, status)
			ok, outcome := done(status, answer)
			if ok {
				r.outcome = outcome
				r.took = time.Since(r.at)
				return r
			}
			if !retried(status) {
				r.err = fmt.Errorf("%s: the API answered %d: %s", path, status, answer)
				r.took = time.Since(r.at)
				return r
			}
		}
		if attempt == maxAttempts || ctx.Err() != nil {
			r.err = fmt.Errorf("%s: %w after %d attempts (last: %v, status %d)", path, errGaveUp, attempt, err, status)
			r.took = time.Since(r.at)
			return r
		}
		select {
		case <-ctx.Done():
		case <-time.After(max(wait, 50*time.Millisecond)):
		}
	}
}

// retried reports whether an answer is repeated: the key over its rate,
// or a request the server could not finish.
func retried(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// post sends one request and returns its status, its body and how long to
// wait before a retry.
func (c *tenantClient) post(ctx context.Context, path string, doc []byte) (int, []byte, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(doc))
	if err != nil {
		return 0, nil, time.Second, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, time.Second, fmt.Errorf("error calling the API: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, time.Second, fmt.Errorf("error reading the API's answer: %w", err)
	}
	return resp.StatusCode, answer, RetryAfter(resp.Header.Get("Retry-After"), time.Second), nil
}

// RetryAfter reads a Retry-After header in whole seconds, as the API
// sends it; fallback when it is absent or not a count of seconds.
func RetryAfter(header string, fallback time.Duration) time.Duration {
	n, err := strconv.Atoi(header)
	if err != nil || n < 0 {
		return fallback
	}
	return time.Duration(n) * time.Second
}

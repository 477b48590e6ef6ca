package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
)

// Op is one operation the workload made and the answer it got.
type Op struct {
	At time.Time `json:"at"`
	// Kind is schedule, resubmit, changed, bad, cancel, move_window,
	// move_reminder, approve or reject.
	Kind string `json:"kind"`
	// Via is cli or api.
	Via string `json:"via"`
	// Tenant is the tenant it acted for ("" the default tenant).
	Tenant     string `json:"tenant,omitempty"`
	Shipment   string `json:"shipment"`
	Update     string `json:"update,omitempty"`
	Subscriber string `json:"subscriber,omitempty"`
	// Results are a schedule's answers, Outcomes an operation's.
	Results  []starter.Result  `json:"results,omitempty"`
	Outcomes []starter.Outcome `json:"outcomes,omitempty"`
	// DueAt is the due time (move_reminder) or window start
	// (move_window) a reschedule asked for.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Code is the HTTP status or the CLI's exit code.
	Code int    `json:"code"`
	Err  string `json:"error,omitempty"`
	// Done is when its answer came.
	Done time.Time `json:"done"`
}

// doc is an update as the tracker sends it, and what the workload needs of
// it later.
type doc struct {
	Tenant           string
	Shipment, Update string
	Body             map[string]any
	Subscribers      []string
	Window           bool
	Approval         bool
	// SendWindow: its reminders go out in a send window.
	SendWindow bool
	// Digest is the digest interval it asks for (0: none).
	Digest time.Duration
	// Due is the latest time one of its subscribers' reminders goes out
	// (its due time, or its send window's opening).
	Due time.Time
}

// Workload asks a seeded random stream of operations of the system, each
// through the CLI or the HTTP API.
type Workload struct {
	env  *Env
	rng  *rand.Rand
	seed uint64
	dir  string

	mu   sync.Mutex
	docs []*doc
	ops  []Op
	n    int
}

// NewWorkload returns the workload of seed.
func NewWorkload(env *Env, seed uint64) *Workload {
	return &Workload{env: env, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), seed: seed, dir: env.T.TempDir()}
}

// Ops are the operations made so far, in order.
func (w *Workload) Ops() []Op {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Op(nil), w.ops...)
}

// Shipments are the shipment ids the workload scheduled (or tried to).
func (w *Workload) Shipments() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, d := range w.docs {
		out = append(out, d.Shipment)
	}
	return out
}

// LastDue is the latest due time any scheduled reminder was given.
func (w *Workload) LastDue() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, d := range w.docs {
		if d.Due.After(last) {
			last = d.Due
		}
	}
	return last
}

// callers is how many operations may be under way at once: an operation
// may still be running when the next is drawn, as several trackers' and
// operators' would, and one held by a frozen replica or database does not
// stop the others.
const callers = 8

// Run makes operations until ctx ends: drawn one every 150 to 600 ms in
// the seed's order, callers at a time.
func (w *Workload) Run(ctx context.Context) {
	callers := make(chan struct{}, callers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		op := w.draw()
		select {
		case callers <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-callers }()
			op(ctx)
		})
		w.mu.Lock()
		pause := time.Duration(150+w.rng.IntN(450)) * time.Millisecond
		w.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// draw picks the next operation by the seed. A new update joins the
// updates the next draws pick from at once, so the draws do not depend on
// how fast the system answers.
func (w *Workload) draw() func(context.Context) {
	w.mu.Lock()
	roll, via := w.rng.IntN(100), "cli"
	if w.rng.IntN(2) == 0 {
		via = "api"
	}
	var d *doc
	if len(w.docs) > 0 {
		d = w.docs[w.rng.IntN(len(w.docs))]
	}
	w.mu.Unlock()
	switch {
	case d == nil || roll < 30:
		n := w.newDoc()
		w.mu.Lock()
		w.docs = append(w.docs, n)
		w.mu.Unlock()
		return func(ctx context.Context) { w.schedule(ctx, via, n, "schedule") }
	case roll < 38:
		return func(ctx context.Context) { w.schedule(ctx, via, d, "resubmit") }
	case roll < 43:
		return func(ctx context.Context) { w.changed(ctx, via, d) }
	case roll < 47:
		return func(ctx context.Context) { w.bad(ctx, via) }
	case roll < 60:
		return func(ctx context.Context) { w.operate(ctx, via, "cancel", d, "") }
	case roll < 70 && d.Window:
		return func(ctx context.Context) { w.operate(ctx, via, "move_window", d, "") }
	case roll < 78:
		sub := w.pick(d.Subscribers)
		return func(ctx context.Context) { w.operate(ctx, via, "move_reminder", d, sub) }
	case roll < 90 && d.Approval:
		sub := w.maybeOne(d)
		return func(ctx context.Context) { w.operate(ctx, via, "approve", d, sub) }
	case d.Approval:
		sub := w.maybeOne(d)
		return func(ctx context.Context) { w.operate(ctx, via, "reject", d, sub) }
	}
	n := w.newDoc()
	w.mu.Lock()
	w.docs = append(w.docs, n)
	w.mu.Unlock()
	return func(ctx context.Context) { w.schedule(ctx, via, n, "schedule") }
}

func (w *Workload) pick(ids []string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return ids[w.rng.IntN(len(ids))]
}

// maybeOne is one subscriber of d, or "" (all of the update), by the seed.
func (w *Workload) maybeOne(d *doc) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rng.IntN(2) == 0 {
		return ""
	}
	return d.Subscribers[w.rng.IntN(len(d.Subscribers))]
}

// newDoc draws a new update: 2 to 5 subscribers on email and webhook, due
// 5 to 90 s out (or before a delivery window that far out), some needing
// approval with short timeouts, some asking for a digest.
func (w *Workload) newDoc() *doc {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	d := &doc{Shipment: fmt.Sprintf("SOAK-%d-%04d", w.seed, w.n), Update: "u1", Tenant: Tenants[w.rng.IntN(len(Tenants))]}
	now := time.Now()
	d.Window = w.rng.IntN(3) == 0
	d.Approval = w.rng.IntN(4) == 0
	if w.rng.IntN(3) == 0 {
		d.Digest = digestEvery
	}
	body := map[string]any{
		"shipment_id": d.Shipment, "update_id": d.Update, "kind": "delivery_window",
		"message":    map[string]any{"subject": "Delivery window opens soon", "text": "Dock " + fmt.Sprint(w.n) + "."},
		"escalation": map[string]any{"email": "lead@shipper.example"},
	}
	window := now.Add(time.Duration(30+w.rng.IntN(90)) * time.Second).UTC().Truncate(time.Second)
	if d.Window {
		body["window_start"] = window.Format(time.RFC3339)
	}
	// One in four goes out in a send window that opens a minute or two
	// from now (next), or closes half a minute from now before reminders
	// due after it (previous).
	var sw *reminder.SendWindow
	if d.SendWindow = w.rng.IntN(4) == 0; d.SendWindow {
		sw = w.sendWindow(now)
		body["send_window"] = map[string]any{"days": "mon-sun",
			"hours": sw.Window.From.String() + "-" + sw.Window.To.String(), "time_zone": sw.TimeZone}
		body["window_policy"] = string(sw.Policy)
	}
	if d.Digest > 0 {
		body["digest"] = fmt.Sprintf("%dm", int(d.Digest/time.Minute))
	}
	if d.Approval {
		timeout := 3 + w.rng.IntN(8)
		body["approval"] = map[string]any{"timeout": fmt.Sprintf("%ds", timeout), "expire_after": fmt.Sprintf("%ds", timeout+2+w.rng.IntN(12))}
	}
	var subs []any
	shared := map[string]bool{} // channels whose shared address a subscriber took
	for i := range 2 + w.rng.IntN(4) {
		id := fmt.Sprintf("s%d", i)
		sub := map[string]any{"id": id}
		channel := "email"
		if w.rng.IntN(3) == 0 {
			channel = "webhook"
			sub["channel"], sub["url"], sub["secret"] = "webhook", w.env.Stack.Hooks.URL()+"/in/"+d.Shipment, w.env.Stack.HookSecret
		} else {
			sub["channel"], sub["email"] = "email", fmt.Sprintf("%s.%s@customer.example", strings.ToLower(d.Shipment), id)
		}
		// A digest's update: its first subscriber of each channel takes
		// the tenant's shared inbox or endpoint, where other updates'
		// members meet it; the others keep their own (a digest of one,
		// which goes out alone) or turn the digest off.
		digest := d.Digest
		switch {
		case d.Digest == 0:
		case !shared[channel]:
			shared[channel] = true
			if channel == "webhook" {
				sub["url"] = w.env.Stack.Hooks.URL() + "/in/digest-" + tenantName(d.Tenant)
			} else {
				sub["email"] = "digest." + tenantName(d.Tenant) + "@customer.example"
			}
		case w.rng.IntN(2) == 0:
			sub["digest"], digest = "off", 0
		}
		due := now.Add(time.Duration(5+w.rng.IntN(86)) * time.Second)
		if d.Window {
			before := time.Duration(1+w.rng.IntN(20)) * time.Second
			sub["remind_before"] = before.String()
			due = window.Add(-before)
		} else {
			sub["due_at"] = due.UTC().Format(time.RFC3339Nano)
		}
		if d.Approval && w.rng.IntN(2) == 0 {
			sub["requires_approval"] = true
		}
		if goes := reminder.GoesOutAt(due, sw, digest); goes.After(d.Due) {
			d.Due = goes
		}
		subs = append(subs, sub)
		d.Subscribers = append(d.Subscribers, id)
	}
	body["subscribers"] = subs
	d.Body = body
	return d
}

// digestEvery is the digest interval a third of the updates ask for: a
// minute, so the members due within one meet at its boundary inside a
// short run.
const digestEvery = time.Minute

// sendWindow draws a send window, open every day, in an Etc/GMT zone in
// which now is about noon (so its hours never cross a local midnight):
// with the next policy it opens 60 to 120 s from now and stays open half
// an hour; with the previous one it opened half an hour ago and closes 30
// to 90 s from now, before some of the reminders due.
func (w *Workload) sendWindow(now time.Time) *reminder.SendWindow {
	zone, loc := testenv.MiddayZone(now)
	clock := func(t time.Time) sendwindow.Clock {
		t = t.In(loc)
		return sendwindow.Clock(t.Hour()*60 + t.Minute())
	}
	sw := &reminder.SendWindow{TimeZone: zone, Policy: sendwindow.Next}
	sw.Window.Days = 1<<7 - 1
	if w.rng.IntN(3) == 0 {
		sw.Policy = sendwindow.Previous
		sw.Window.From, sw.Window.To = clock(now)-30, clock(now.Add(time.Duration(30+w.rng.IntN(60))*time.Second))+1
	} else {
		sw.Window.From = clock(now.Add(time.Duration(60+w.rng.IntN(60))*time.Second)) + 1
		sw.Window.To = sw.Window.From + 30
	}
	return sw
}

// schedule sends d: new (kind "schedule"), or again as it was
// ("resubmit").
func (w *Workload) schedule(ctx context.Context, via string, d *doc, kind string) {
	op := Op{Kind: kind, Via: via, Tenant: d.Tenant, Shipment: d.Shipment, Update: d.Update}
	w.send(ctx, &op, d.Body)
}

// changed sends d again with another subject: refused, naming it, and
// nothing written.
func (w *Workload) changed(ctx context.Context, via string, d *doc) {
	body := map[string]any{}
	for k, v := range d.Body {
		body[k] = v
	}
	body["message"] = map[string]any{"subject": "A changed subject", "text": "Changed."}
	op := Op{Kind: "changed", Via: via, Tenant: d.Tenant, Shipment: d.Shipment, Update: d.Update}
	w.send(ctx, &op, body)
}

// bad sends a malformed update (an address that is none): refused, and
// nothing written for its shipment.
func (w *Workload) bad(ctx context.Context, via string) {
	w.mu.Lock()
	w.n++
	shipment := fmt.Sprintf("SOAK-%d-%04d-BAD", w.seed, w.n)
	w.mu.Unlock()
	body := map[string]any{
		"shipment_id": shipment, "update_id": "u1", "kind": "delivery_window",
		"message": map[string]any{"subject": "s", "text": "t"},
		"subscribers": []any{map[string]any{"id": "s0", "channel": "email", "email": "not an address",
			"due_at": time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}},
	}
	op := Op{Kind: "bad", Via: via, Shipment: shipment, Update: "u1"}
	w.send(ctx, &op, body)
}

// send schedules body through via and records op.
func (w *Workload) send(ctx context.Context, op *Op, body map[string]any) {
	op.At = time.Now()
	raw, _ := json.Marshal(body)
	switch op.Via {
	case "cli":
		file := filepath.Join(w.dir, fmt.Sprintf("%s-%d.json", op.Shipment, time.Now().UnixNano()))
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			op.Err = err.Error()
			break
		}
		out, code, err := w.cli(ctx, "schedule", "--tenant", tenantName(op.Tenant), "-f", file)
		op.Code = code
		if err != nil {
			op.Err = err.Error()
		}
		op.Results = decodeLines[starter.Result](out)
	default:
		code, out, err := w.api(ctx, op.Tenant, http.MethodPost, "/v1/updates", raw)
		op.Code = code
		if err != nil {
			op.Err = err.Error()
		}
		var res struct {
			Results []starter.Result `json:"results"`
		}
		_ = json.Unmarshal(out, &res)
		op.Results = res.Results
	}
	w.record(*op)
}

// operate makes an operation on d (one subscriber's, or the update's).
func (w *Workload) operate(ctx context.Context, via, kind string, d *doc, subscriber string) {
	op := Op{At: time.Now(), Kind: kind, Via: via, Tenant: d.Tenant, Shipment: d.Shipment, Update: d.Update, Subscriber: subscriber}
	reminderID := reminder.ID(d.Tenant, d.Shipment, d.Update, subscriber)
	tenant := tenantName(d.Tenant)
	var args []string
	var path string
	var body map[string]any
	switch kind {
	case "cancel":
		args = []string{"cancel", "--shipment", d.Shipment, "--tenant", tenant, "--by", "soak"}
		path = "/v1/shipments/" + d.Shipment + "/cancel"
		body = map[string]any{"by": "soak", "reason": "soak"}
	case "move_window":
		w.mu.Lock()
		to := time.Now().Add(time.Duration(20+w.rng.IntN(70)) * time.Second).UTC().Truncate(time.Second)
		w.mu.Unlock()
		w.later(d, to)
		op.DueAt = &to
		args = []string{"reschedule", "--shipment", d.Shipment, "--update", d.Update, "--tenant", tenant, "--window-start", to.Format(time.RFC3339), "--by", "soak"}
		path = "/v1/shipments/" + d.Shipment + "/updates/" + d.Update + "/reschedule"
		body = map[string]any{"window_start": to.Format(time.RFC3339), "by": "soak"}
	case "move_reminder":
		w.mu.Lock()
		to := time.Now().Add(time.Duration(5+w.rng.IntN(60)) * time.Second).UTC()
		w.mu.Unlock()
		w.later(d, to)
		op.DueAt = &to
		args = []string{"reschedule", "--reminder", reminderID, "--due-at", to.Format(time.RFC3339Nano), "--by", "soak"}
		path = "/v1/shipments/" + d.Shipment + "/updates/" + d.Update + "/reminders/" + subscriber + "/reschedule"
		body = map[string]any{"due_at": to.Format(time.RFC3339Nano), "by": "soak"}
	case "approve", "reject":
		if subscriber == "" {
			args = []string{kind, "--shipment", d.Shipment, "--update", d.Update, "--tenant", tenant, "--by", "soak"}
			path = "/v1/shipments/" + d.Shipment + "/updates/" + d.Update + "/" + kind
		} else {
			args = []string{kind, "--reminder", reminderID, "--by", "soak"}
			path = "/v1/shipments/" + d.Shipment + "/updates/" + d.Update + "/reminders/" + subscriber + "/" + kind
		}
		body = map[string]any{"by": "soak", "reason": "soak"}
	}
	if via == "cli" {
		out, code, err := w.cli(ctx, args...)
		op.Code = code
		if err != nil {
			op.Err = err.Error()
		}
		op.Outcomes = decodeLines[starter.Outcome](out)
	} else {
		raw, _ := json.Marshal(body)
		code, out, err := w.api(ctx, d.Tenant, http.MethodPost, path, raw)
		op.Code = code
		if err != nil {
			op.Err = err.Error()
		}
		var res struct {
			Outcomes []starter.Outcome `json:"outcomes"`
		}
		_ = json.Unmarshal(out, &res)
		op.Outcomes = res.Outcomes
	}
	w.record(op)
}

// later notes that d may now be due as late as to (its digest's boundary
// after it).
func (w *Workload) later(d *doc, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	to = reminder.DigestAt(to, d.Digest)
	if to.After(d.Due) {
		d.Due = to
	}
}

func (w *Workload) record(op Op) {
	op.Done = time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
}

// cli runs the binary with args and returns its output and exit code.
func (w *Workload) cli(ctx context.Context, args ...string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(context.WithoutCancel(ctx), w.env.Bin, args...)
	cmd.Env = w.env.ProcessEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.Bytes(), exit.ExitCode(), fmt.Errorf("%s", strings.TrimSpace(errOut.String()))
	}
	if err != nil {
		return out.Bytes(), -1, err
	}
	return out.Bytes(), 0, nil
}

// api calls the tracker API through the balancer, with tenant's key.
func (w *Workload) api(ctx context.Context, tenant, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), method, w.env.Balancer.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.env.APIKeys[tenant])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && err == nil {
		err = fmt.Errorf("%d: %s", resp.StatusCode, bytes.TrimSpace(out))
	}
	return resp.StatusCode, out, err
}

// decodeLines reads JSON lines of T, skipping what is not one.
func decodeLines[T any](out []byte) []T {
	var res []T
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		if json.Unmarshal(sc.Bytes(), &v) == nil {
			res = append(res, v)
		}
	}
	return res
}

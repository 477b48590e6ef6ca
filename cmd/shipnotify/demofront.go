package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/shipnotify/shipnotify/internal/api"
	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/internal/console"
	"github.com/shipnotify/shipnotify/internal/links"
	"github.com/shipnotify/shipnotify/internal/unsubscribe"
	"github.com/shipnotify/shipnotify/starter"
)

// demoFront is what `shipnotify serve` serves — the tracker API and the
// approval console — run inside the demo on its starter, with keys made for
// this run only.
type demoFront struct {
	url         string
	trackerKey  string
	approverKey string
	// signer makes the escalation email's decision links, pointing here.
	signer *links.Signer
	stop   func()
}

// startDemoFront serves the API and the console on addr.
func startDemoFront(d *cli.Deps, st *starter.Starter, addr string) (*demoFront, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &demoFront{url: "http://" + ln.Addr().String()}
	linkKeys, err := demoKeys()
	if err != nil {
		return nil, err
	}
	// The console's own session key, apart from the link key, as serve's.
	sessionKeys, err := demoKeys()
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(f.url)
	f.signer = &links.Signer{Keys: linkKeys, BaseURL: base, Now: time.Now}
	tracker, trackerKey, err := api.NewKey("demo-tracker", api.Scopes)
	if err != nil {
		return nil, err
	}
	approver, approverKey, err := api.NewKey("demo-approver", []api.Scope{api.ScopeApprove})
	if err != nil {
		return nil, err
	}
	f.trackerKey, f.approverKey = tracker, approver
	approvers, err := console.ParseApprovers(strings.NewReader(approverKey.Line()))
	if err != nil {
		return nil, err
	}
	apiHandler, err := api.New(api.Options{Starter: st, Keys: []api.Key{trackerKey}, Logger: d.Logger})
	if err != nil {
		return nil, err
	}
	mux := api.NewRoot(apiHandler) // what serve listens with
	mux.Handle(console.Path, console.New(console.Options{
		Starter: st, Mirror: st.Mirror, Links: f.signer, SessionKeys: sessionKeys, Approvers: approvers, Now: time.Now, Logger: d.Logger,
	}))
	mux.Handle(unsubscribe.Path, unsubscribe.New(linkKeys, st.Mirror, d.Logger))
	srv := api.NewServer(mux, api.DefaultRequestTimeout)
	go func() { _ = srv.Serve(ln) }()
	f.stop = func() { _ = srv.Close() }
	return f, nil
}

// demoKeys makes a signing key for this run only.
func demoKeys() (links.Keys, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return links.Keys{}, fmt.Errorf("error making the demo's keys: %w", err)
	}
	return links.ParseKeys(base64.StdEncoding.EncodeToString(raw))
}

// curlSchedule is a curl command that schedules an update needing approval
// through the API, for the console to decide. Its approval times out in a
// minute, so that, left undecided, the escalation mail and its signed links
// reach the mail sink while the demo runs; it is due in ten.
func (f *demoFront) curlSchedule(now time.Time) string {
	doc, _ := json.Marshal(map[string]any{
		"shipment_id": "SHP-2002", "update_id": "window-" + now.UTC().Format("20060102-150405"), "kind": "delivery_window",
		"message":    map[string]any{"subject": "Delivery window for SHP-2002 opens soon", "text": "Dock 7."},
		"approval":   map[string]any{"required": true, "timeout": "1m"},
		"escalation": map[string]any{"email": "lead@shipper.example"},
		"subscribers": []any{map[string]any{"id": "consignee-ops", "channel": "email", "email": "ops@consignee.example",
			"due_at": now.Add(10 * time.Minute).UTC().Format(time.RFC3339)}},
	})
	return fmt.Sprintf("curl -sS -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' --data '%s' %s/v1/updates",
		f.trackerKey, doc, f.url)
}

// curlFeed is a curl command that reads the change feed from its start.
func (f *demoFront) curlFeed() string {
	return fmt.Sprintf("curl -sS -H 'Authorization: Bearer %s' '%s/v1/reminders?updated_since=0'", f.trackerKey, f.url)
}

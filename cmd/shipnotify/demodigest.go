package main

import (
	"context"
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// demoDigestEvery is the demo's digest interval: the shortest a digest
// takes, so the demo waits at most a minute for its boundary.
const demoDigestEvery = reminder.MinDigest

// demoDigestShipments are the shipments whose reminders go to the ops
// inbox in one digest.
var demoDigestShipments = []string{"SHP-1003", "SHP-1004", "SHP-1005"}

// opsDigest is the ops inbox's three reminders as scheduled, and the
// boundary they go out at together.
type opsDigest struct {
	results []starter.Result
	at      time.Time
}

// scheduleOpsDigest schedules three shipments' reminders to one ops inbox
// with a digest every minute, due a second apart just before the first
// minute's boundary at least ten seconds away: they go out at that
// boundary as one mail listing the three shipments.
func scheduleOpsDigest(ctx context.Context, st *starter.Starter, now time.Time) (opsDigest, error) {
	every := demoDigestEvery
	dg := opsDigest{at: reminder.DigestAt(now.Add(10*time.Second), every)}
	for i, shipment := range demoDigestShipments {
		u := reminder.Update{
			ShipmentID: shipment,
			UpdateID:   "window-" + now.UTC().Format("20060102-150405"),
			Kind:       "delivery_window",
			Message: reminder.Message{
				Subject: "Delivery window for " + shipment + " opens in 3 days",
				Text:    fmt.Sprintf("Shipment %s reaches dock %d when the window opens.", shipment, i+4),
			},
			Subscribers: []reminder.Subscriber{{
				ID: "ops-desk", Channel: reminder.Email, Email: "ops@consignee.example", Name: "Dock Ops",
				DueAt: dg.at.Add(time.Duration(i-len(demoDigestShipments)) * time.Second), TimeZone: "Europe/Amsterdam",
			}},
			Digest: &every,
		}
		results, err := st.Schedule(ctx, u)
		if err != nil {
			return opsDigest{}, err
		}
		dg.results = append(dg.results, results...)
	}
	return dg, nil
}

// digestKey is the key the ops digest was sealed under, once its mail is
// sent ("" if it was not).
func (dg opsDigest) digestKey(ctx context.Context, store *mirror.Store) (string, error) {
	row, err := store.Get(ctx, dg.results[0].ReminderID)
	if err != nil {
		return "", err
	}
	return row.DigestKey, nil
}

package statusevents_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/statusevents"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/webhook"
)

// tenantReceiver is another tenant's receiver and its configuration of
// the tracker's endpoint name.
func tenantReceiver(t *testing.T, name, tenant string) (*sink.WebhookSink, statusevents.Endpoint) {
	t.Helper()
	secret := webhook.NewSecret()
	rcv, err := sink.StartWebhook("", secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rcv.Close() })
	return rcv, statusevents.Endpoint{Name: name, URL: rcv.URL() + "/status", Secret: secret, Events: reminder.StatusTypes, Tenant: tenant}
}

// tenantsOf is the tenant of each event a receiver took ("" the default).
func tenantsOf(t *testing.T, hooks []sink.Hook) []string {
	t.Helper()
	out := make([]string, len(hooks))
	for i, h := range hooks {
		var ev struct {
			Data struct {
				Tenant string `json:"tenant"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(h.Body, &ev))
		out[i] = ev.Data.Tenant
	}
	return out
}

// An endpoint name moved to another tenant (serve's file now names it for
// globex, with globex's URL) receives none of the events its old tenant's
// reminders owed it: those are given up, saying why, where `shipnotify
// outbox list` shows them; the new tenant's events go to it.
func TestAnEndpointMovedToAnotherTenantGetsNoneOfTheOldTenantsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	_, acme := tenantReceiver(t, "tracker", "acme")
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{acme.Registration()}))
	owed := testenv.ScheduleInMirror(t, store, "acme", "SHP-moved", 3)

	globexReceiver, globex := tenantReceiver(t, "tracker", "globex")
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{globex.Registration()}))
	theirs := testenv.ScheduleInMirror(t, store, "globex", "SHP-moved", 2)
	tr := &tracker{db: db, store: store, receiver: globexReceiver, endpoint: globex}
	run(t, tr.relay(t))

	got := tr.waitFor(t, len(theirs), 30*time.Second)
	require.Equal(t, []string{"globex", "globex"}, tenantsOf(t, globexReceiver.Hooks()), "globex's events only")
	for _, r := range got {
		require.Contains(t, theirs, r.Reminder)
	}
	require.Eventually(t, func() bool { return pendingRows(t, tr) == 0 }, 10*time.Second, 20*time.Millisecond)
	rows, err := store.OutboxRows(ctx, mirror.OutboxFilter{Endpoint: "tracker"})
	require.NoError(t, err)
	require.Len(t, rows, len(owed), "acme's events stay, given up")
	for _, row := range rows {
		require.Contains(t, owed, row.ReminderID)
		require.Equal(t, "given_up", row.Status)
		require.Contains(t, row.LastError, "another tenant")
		require.Zero(t, row.Attempts, "never posted")
	}
}

// A rolling restart whose replicas read different endpoint files (the old
// one names the endpoint for acme, the new one for globex, each with its
// own URL) leaks no event: the old replica's relay posts none of globex's
// events to acme's URL, and the new one posts them all to globex's.
func TestReplicasThatDisagreeOnAnEndpointsTenantLeakNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	acmeReceiver, acme := tenantReceiver(t, "tracker", "acme")
	globexReceiver, globex := tenantReceiver(t, "tracker", "globex")
	// The old replica registered first, the new one last: the mirror
	// writes the endpoint's events for globex.
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{acme.Registration()}))
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{globex.Registration()}))
	theirs := testenv.ScheduleInMirror(t, store, "globex", "SHP-rolling", 4)

	old := &tracker{db: db, store: store, receiver: acmeReceiver, endpoint: acme}
	n, err := old.relay(t).Pass(ctx, acme)
	require.NoError(t, err)
	require.Zero(t, n, "the old replica claims none of globex's events")
	require.Zero(t, acmeReceiver.Requests(), "and posts nothing to acme's URL")

	run(t, old.relay(t))
	tr := &tracker{db: db, store: store, receiver: globexReceiver, endpoint: globex}
	run(t, tr.relay(t))
	got := tr.waitFor(t, len(theirs), 30*time.Second)
	requireInOrderOnce(t, got, len(theirs), 1)
	require.Eventually(t, func() bool { return pendingRows(t, tr) == 0 }, 10*time.Second, 20*time.Millisecond)
	require.Zero(t, acmeReceiver.Requests(), "acme's URL heard nothing of globex")
}

// The status events a tenant's endpoint is posted carry no count of
// another tenant's activity: between acme's two events globex writes
// seven, and acme's webhook-ids (and the bodies' ids) are sealed, where
// evt_ and the trail's numbers would have said seven came between. Each
// is the id the API shows for the trail entry it comes from.
func TestATenantsStatusEventIdsCountNoOtherTenantsEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	receiver, acme := tenantReceiver(t, "acme-tracker", "acme")
	require.NoError(t, store.RegisterStatusEndpoints(ctx, []mirror.StatusEndpoint{acme.Registration()}))
	first := testenv.ScheduleInMirror(t, store, "acme", "SHP-ids-1", 1)[0]
	testenv.ScheduleInMirror(t, store, "globex", "SHP-ids-globex", 7)
	second := testenv.ScheduleInMirror(t, store, "acme", "SHP-ids-2", 1)[0]

	tr := &tracker{db: db, store: store, receiver: receiver, endpoint: acme}
	run(t, tr.relay(t))
	got := tr.waitFor(t, 2, 30*time.Second)
	requireInOrderOnce(t, got, 2, 1)
	ids := opaque.Development() // the relay's, as serve's with SHIPNOTIFY_ID_KEY unset
	for _, r := range got {
		require.Contains(t, []string{first, second}, r.Reminder)
		events, err := store.Events(ctx, r.Reminder)
		require.NoError(t, err)
		require.Equal(t, ids.EventID(events[0].ID), r.ID, "the id the API shows for its trail entry")
		_, err = strconv.ParseInt(strings.TrimPrefix(r.ID, opaque.EventPrefix), 10, 64)
		require.Error(t, err, "%s is no number acme can subtract", r.ID)
	}
}

package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/shipnotify/shipnotify/activities"
	"github.com/shipnotify/shipnotify/delivery"
	"github.com/shipnotify/shipnotify/internal/tools/pager"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// gateway is a paging gateway: it records each page it takes and answers
// 201 with its id; hang makes it take the next page and never answer.
type gateway struct {
	*httptest.Server
	mu    sync.Mutex
	pages []gatewayPage
	hang  chan struct{}
}

type gatewayPage struct{ To, Text, Key, IdempotencyKey string }

func startGateway(t *testing.T) *gateway {
	g := &gateway{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p gatewayPage
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, "bad page", http.StatusBadRequest)
			return
		}
		p.IdempotencyKey = r.Header.Get("Idempotency-Key")
		g.mu.Lock()
		g.pages = append(g.pages, p)
		n, hang := len(g.pages), g.hang
		g.hang = nil
		g.mu.Unlock()
		if hang != nil {
			<-hang
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "pg-" + strconv.Itoa(n)})
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *gateway) taken() []gatewayPage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayPage(nil), g.pages...)
}

// hangNext makes the next page go unanswered until the test ends.
func (g *gateway) hangNext(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	g.mu.Lock()
	g.hang = release
	g.mu.Unlock()
}

// pagerChannel registers the pager channel through the seam: its
// migration on the fixture's schema, its sender on the activities.
func (f *fixture) pagerChannel(t *testing.T, timeout time.Duration) *gateway {
	t.Helper()
	_, err := f.db.Pool.Exec(context.Background(), pager.Migration)
	require.NoError(t, err)
	g := startGateway(t)
	f.acts.Senders = map[reminder.Channel]delivery.Sender{pager.Channel: pager.NewSender(g.URL, timeout)}
	return g
}

// schedulePager mirrors one pager reminder, planned with the channel's
// address check, and returns its notify input.
func (f *fixture) schedulePager(t *testing.T) activities.NotifyInput {
	t.Helper()
	u := reminder.Update{
		ShipmentID: testenv.ID(t, "SHP"), UpdateID: "window-1", Kind: "delivery_window",
		Message:     reminder.Message{Subject: "Window opens in 3 days", Text: "Dock 4."},
		Subscribers: []reminder.Subscriber{{ID: "on-call", Channel: pager.Channel, Address: "+4915112345678", DueAt: f.now}},
	}
	rems, err := u.Plan(reminder.PlanOptions{Now: f.now, Channels: map[reminder.Channel]reminder.CheckAddress{pager.Channel: pager.CheckAddress}})
	require.NoError(t, err)
	r := rems[0]
	stored, err := f.mirror.ScheduleUpdate(context.Background(), u, []mirror.NewReminder{{
		Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID),
	}})
	require.NoError(t, err)
	require.Equal(t, "+4915112345678", stored.Reminders[0].Requested.Address, "the address is stored and read back")
	return activities.NotifyInput{ReminderID: r.ID, SubscriberID: r.SubscriberID, DueAt: r.DueAt}
}

// A channel is one package plus a migration. Without its migration the
// mirror refuses its reminders; with it, and its sender registered, a
// pager reminder keeps every promise email's does: one send per delivery
// key, a claim another execution holds is not taken, a finished reminder
// is never sent, and an unanswered send keeps its claim.
func TestANewChannelKeepsTheKeyAndTheClaim(t *testing.T) {
	t.Parallel()
	t.Run("the mirror refuses it without its migration", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		u := reminder.Update{ShipmentID: testenv.ID(t, "SHP"), UpdateID: "u", Kind: "k",
			Message:     reminder.Message{Subject: "s", Text: "t"},
			Subscribers: []reminder.Subscriber{{ID: "on-call", Channel: pager.Channel, Address: "+4915112345678", DueAt: f.now}}}
		rems, err := u.Plan(reminder.PlanOptions{Now: f.now, Channels: map[reminder.Channel]reminder.CheckAddress{pager.Channel: pager.CheckAddress}})
		require.NoError(t, err)
		_, err = f.mirror.ScheduleUpdate(context.Background(), u, []mirror.NewReminder{{Reminder: rems[0], WorkflowID: "wf"}})
		require.ErrorContains(t, err, "reminders_channel_check")
	})
	t.Run("twice for one key sends once", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		g := f.pagerChannel(t, 5*time.Second)
		in := f.schedulePager(t)
		first, err := f.notify(t, in)
		require.NoError(t, err)
		second, err := f.notify(t, in)
		require.NoError(t, err)
		pages := g.taken()
		require.Len(t, pages, 1, "the second execution for the same key sends nothing")
		require.Equal(t, gatewayPage{To: "+4915112345678", Text: "Window opens in 3 days", Key: in.Key(), IdempotencyKey: in.Key()}, pages[0])
		require.False(t, first.AlreadySent)
		require.True(t, second.AlreadySent)
		require.Equal(t, "pg-1", first.ProviderMessageID)
		require.Equal(t, deliveryRow{Status: "sent", Purpose: "reminder", ProviderMessageID: "pg-1", Attempts: 1}, f.delivery(t, in.Key()))
		row, err := f.mirror.Get(context.Background(), in.ReminderID)
		require.NoError(t, err)
		require.Equal(t, reminder.Sent, row.State, "a page is sent; no provider reports on it")
		require.Equal(t, []string{"scheduled", "sent"}, f.eventTypes(t, in.ReminderID))
	})
	t.Run("a claim held by a live execution is not taken", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		g := f.pagerChannel(t, 5*time.Second)
		in := f.schedulePager(t)
		_, err := f.db.Pool.Exec(context.Background(), `
INSERT INTO deliveries (delivery_key, reminder_id, purpose, status, claimed_by, lease_until)
VALUES ($1, $2, 'reminder', 'sending', 'another-worker', now() + interval '1 minute')`, in.Key(), in.ReminderID)
		require.NoError(t, err)
		_, err = f.notify(t, in)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "got %v", err)
		require.False(t, appErr.NonRetryable(), "retry later: the other execution may still finish")
		require.Empty(t, g.taken(), "nothing sent while another execution holds the key")

		_, err = f.db.Pool.Exec(context.Background(), `UPDATE deliveries SET lease_until = now() - interval '1 second'`)
		require.NoError(t, err)
		_, err = f.notify(t, in)
		require.NoError(t, err)
		require.Len(t, g.taken(), 1, "the lapsed claim is taken over")
	})
	t.Run("a cancelled reminder is never sent", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		g := f.pagerChannel(t, 5*time.Second)
		in := f.schedulePager(t)
		_, err := f.mirror.Cancel(context.Background(), in.ReminderID, "cancelled", nil)
		require.NoError(t, err)
		_, err = f.notify(t, in)
		require.Equal(t, activities.ErrTypeReminderFinished, errType(err), "got %v", err)
		require.Empty(t, g.taken())
	})
	t.Run("an unanswered send keeps its claim and goes again under its key", func(t *testing.T) {
		t.Parallel()
		f := setup(t)
		f.acts.EvidenceWait = time.Hour // email's; no provider reports on a page
		g := f.pagerChannel(t, 300*time.Millisecond)
		in := f.schedulePager(t)
		g.hangNext(t)
		_, err := f.notify(t, in)
		require.Equal(t, activities.ErrTypeSendUnconfirmed, errType(err), "got %v", err)
		require.Equal(t, "maybe_sent", f.delivery(t, in.Key()).Status, "the claim is kept")
		_, err = f.notify(t, in)
		require.NoError(t, err)
		pages := g.taken()
		require.Len(t, pages, 2)
		require.Equal(t, []string{in.Key(), in.Key()}, []string{pages[0].IdempotencyKey, pages[1].IdempotencyKey},
			"sent again under the same key, for the gateway to drop")
		require.Equal(t, []string{"scheduled", "send_unconfirmed", "sent"}, f.eventTypes(t, in.ReminderID))
	})
}

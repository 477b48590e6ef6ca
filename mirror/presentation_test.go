package mirror_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// The template, its data and the subscriber's name, zone and locale are
// kept in the mirror, read back with the stored update (so a resubmission
// is compared with them) and handed to the send by the claim; nothing
// else carries them.
func TestHowAnEmailLooksIsKeptForTheSend(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	ctx := context.Background()
	now := time.Now()
	u := update("SHP-1", now.Add(time.Hour), now.Add(2*time.Hour))
	u.Message.TemplateID = testenv.TemplateID
	u.Message.TemplateData = []byte(`{"gate": "B", "dock": 4}`)
	u.Subscribers[0].Name, u.Subscribers[0].TimeZone, u.Subscribers[0].Locale = "Rita Ops", "Europe/Berlin", "de-DE"

	stored := insert(t, store, u, now)
	require.Equal(t, testenv.TemplateID, stored.Requested.Message.TemplateID)
	require.JSONEq(t, `{"dock":4,"gate":"B"}`, string(stored.Requested.Message.TemplateData))
	rems, err := u.Plan(reminder.PlanOptions{Now: now})
	require.NoError(t, err)
	var was []reminder.Reminder
	for _, r := range stored.Reminders {
		was = append(was, r.Requested)
	}
	require.Empty(t, reminder.Changes(stored.Requested, was, u, rems), "a resubmission is the same update")

	first := stored.Reminders[0].Requested
	require.Equal(t, [3]string{"Rita Ops", "Europe/Berlin", "de-DE"}, [3]string{first.Name, first.TimeZone, first.Locale})
	res, err := store.ClaimDelivery(ctx, mirror.Claim{Key: first.DeliveryKey(), ReminderID: first.ID,
		Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, res.Verdict)
	got := res.Target
	require.Equal(t, testenv.TemplateID, got.Message.TemplateID)
	require.JSONEq(t, `{"dock":4,"gate":"B"}`, string(got.Message.TemplateData))
	require.Equal(t, [3]string{"Rita Ops", "Europe/Berlin", "de-DE"},
		[3]string{got.Reminder.Name, got.Reminder.TimeZone, got.Reminder.Locale})

	other := stored.Reminders[1].Requested
	res, err = store.ClaimDelivery(ctx, mirror.Claim{Key: other.DeliveryKey(), ReminderID: other.ID,
		Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Empty(t, res.Target.Reminder.Name+res.Target.Reminder.TimeZone+res.Target.Reminder.Locale, "unset stays unset")

	_, err = db.Pool.Exec(ctx, `UPDATE updates SET template_id = 'welcome'`)
	require.ErrorContains(t, err, "updates_template_check", "the schema refuses a template id of another shape")
}

// An update without a template stores none and reads back none.
func TestAnUpdateWithoutATemplateHasNone(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	store := mirror.New(db.Pool)
	now := time.Now()
	stored := insert(t, store, update("SHP-1", now.Add(time.Hour)), now)
	require.Empty(t, stored.Requested.Message.TemplateID)
	require.Nil(t, stored.Requested.Message.TemplateData)
}

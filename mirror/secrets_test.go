package mirror_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func keys(t *testing.T, lines ...string) *codec.Codec {
	t.Helper()
	ks, err := codec.ParseKeys(strings.NewReader(strings.Join(lines, ",")))
	require.NoError(t, err)
	c, err := codec.New(ks, codec.Options{})
	require.NoError(t, err)
	return c
}

func hookUpdate(shipment string, now time.Time) (reminder.Update, []mirror.NewReminder) {
	u := reminder.Update{ShipmentID: shipment, UpdateID: "u-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "s", Text: "t"},
		Subscribers: []reminder.Subscriber{{ID: "hook", Channel: reminder.Webhook,
			URL: "https://hooks.customer.example/in", Secret: hookSecret, DueAt: now.Add(time.Hour)}}}
	rems, _ := u.Plan(reminder.PlanOptions{Now: now, WebhookDestination: func(string) error { return nil }})
	rows := make([]mirror.NewReminder, len(rems))
	for i, r := range rems {
		rows[i] = mirror.NewReminder{Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID)}
	}
	return u, rows
}

func storedSecret(t *testing.T, db testenv.DB) string {
	t.Helper()
	var s string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT webhook_secret FROM reminders`).Scan(&s))
	return s
}

// Webhook secrets are sealed at rest with the payload keys, bound to their
// row, and rotate with the keys: after a new key is put first, resealing
// moves every secret to it so the old key can go.
func TestWebhookSecretsAreSealedAtRestAndRotate(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	oldKey, newKey := codec.NewKey("old"), codec.NewKey("new")
	u, rows := hookUpdate("SHP-1", time.Now())
	_, err := mirror.New(db.Pool).SealSecretsWith(keys(t, oldKey)).ScheduleUpdate(ctx, u, rows)
	require.NoError(t, err)
	at := storedSecret(t, db)
	require.NotContains(t, at, hookSecret, "not in the clear")
	require.True(t, strings.HasPrefix(at, "sealed:v1:old:"))

	rotated := mirror.New(db.Pool).SealSecretsWith(keys(t, newKey, oldKey))
	stored, err := rotated.ScheduleUpdate(ctx, u, rows)
	require.NoError(t, err)
	require.Equal(t, hookSecret, stored.Reminders[0].Requested.WebhookSecret, "opens with the old key")
	n, err := rotated.ResealSecrets(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, strings.HasPrefix(storedSecret(t, db), "sealed:v1:new:"))
	n, err = rotated.ResealSecrets(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "resealing again changes nothing")

	claim, err := mirror.New(db.Pool).SealSecretsWith(keys(t, newKey)).ClaimDelivery(ctx, mirror.Claim{
		Key: rows[0].DeliveryKey(), ReminderID: rows[0].ID, Purpose: reminder.PurposeReminder, Owner: "t", LeaseFor: time.Minute,
	})
	require.NoError(t, err)
	require.Equal(t, hookSecret, claim.Target.Reminder.WebhookSecret, "the old key is no longer needed")
}

// A sealed secret copied onto another reminder's row does not open there.
func TestSealedSecretsAreBoundToTheirRow(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	store := mirror.New(db.Pool).SealSecretsWith(keys(t, codec.NewKey("k")))
	for _, shipment := range []string{"SHP-1", "SHP-2"} {
		u, rows := hookUpdate(shipment, time.Now())
		_, err := store.ScheduleUpdate(ctx, u, rows)
		require.NoError(t, err)
	}
	_, err := db.Pool.Exec(ctx, `
UPDATE reminders SET webhook_secret = (SELECT webhook_secret FROM reminders WHERE shipment_id = 'SHP-1')
 WHERE shipment_id = 'SHP-2'`)
	require.NoError(t, err)
	u, rows := hookUpdate("SHP-2", time.Now())
	_, err = store.ScheduleUpdate(ctx, u, rows)
	require.ErrorContains(t, err, "does not open for its row")
}

// Secrets stored in the clear before sealing was turned on still open, and
// resealing seals them.
func TestSecretsStoredInTheClearAreResealed(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	u, rows := hookUpdate("SHP-1", time.Now())
	_, err := mirror.New(db.Pool).ScheduleUpdate(ctx, u, rows)
	require.NoError(t, err)
	require.Equal(t, hookSecret, storedSecret(t, db))

	store := mirror.New(db.Pool).SealSecretsWith(keys(t, codec.NewKey("k")))
	stored, err := store.ScheduleUpdate(ctx, u, rows)
	require.NoError(t, err)
	require.Equal(t, hookSecret, stored.Reminders[0].Requested.WebhookSecret)
	n, err := store.ResealSecrets(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotContains(t, storedSecret(t, db), hookSecret)
}

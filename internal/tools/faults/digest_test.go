package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
)

// The worker is killed (SIGKILL) while a digest's one mail is in the
// provider's hands: SendGrid took it and answers 6 s later, after the
// kill. Restarted, the worker sends nothing again: SendGrid's events for
// the digest's key, applied to every member's own key, settle each
// member's claim as sent once its dead holder's lease lapses. One mail,
// every member recorded sent under its message id.
func TestWorkerKilledDuringADigestsSend(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true, Events: true})
	s.Mail.SetLatency(6 * time.Second)
	worker := testenv.StartProcess(t, s.Env(), testenv.Binary(t), "worker")
	const inbox = "ops@consignee.example"
	every := time.Minute
	boundary := reminder.DigestAt(time.Now().Add(20*time.Second), every)
	var results []starter.Result
	var keys []string
	for i := range 12 {
		u := emailUpdate(t, 1, boundary.Add(-time.Second-time.Duration(i)*100*time.Millisecond), 0)
		u.ShipmentID = fmt.Sprintf("%s-%02d", u.ShipmentID, i)
		u.Subscribers[0].Email = inbox
		u.Digest = &every
		res, err := s.Starter.Schedule(context.Background(), u)
		require.NoError(t, err)
		results = append(results, res...)
		keys = append(keys, res[0].DeliveryKey)
	}

	ctx, cancel := context.WithDeadline(context.Background(), boundary.Add(time.Minute))
	defer cancel()
	_, err := s.Mail.Wait(ctx, func([]sink.Mail) bool { return s.Mail.InFlight() > 0 })
	require.NoError(t, err, worker.Log())
	worker.Kill()
	mails, err := s.Mail.Wait(ctx, func(m []sink.Mail) bool { return s.Mail.InFlight() == 0 && len(m) == 1 })
	require.NoError(t, err)
	digest := mails[0]
	require.Equal(t, "12", digest.CustomArgs["digest_size"])
	require.Equal(t, reminder.DigestKey(keys), digest.CustomArgs["delivery_key"])
	worker.Start()

	waitAll(t, s, results, 4*time.Minute)
	require.Len(t, s.Mail.Mails(), 1, "the digest went once: its events settled every member\n%s", worker.Log())
	var sent int
	require.NoError(t, s.DB.Pool.QueryRow(context.Background(), `
SELECT count(*) FROM deliveries WHERE delivery_key = ANY($1) AND status = 'sent' AND provider_message_id = $2`,
		keys, digest.MessageID).Scan(&sent))
	require.Equal(t, len(keys), sent, "every member recorded sent under the digest's message id")
}

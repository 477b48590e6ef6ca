package sendgridevents_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/sendgridevents"
	"github.com/shipnotify/shipnotify/internal/tools/testenv"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// With two servers, the one whose pass finds every due escalation held by
// the other's pass looks again in a while, not in a busy loop.
func TestEscalatorWaitsWhileAnotherServerHoldsTheRows(t *testing.T) {
	t.Parallel()
	s := testenv.NewStackWith(t, testenv.StackOptions{NoWorker: true})
	u := s.Update(t, time.Now(), reminder.Email)
	u.EscalationEmail = escalationContact
	res, err := s.Starter.Schedule(context.Background(), u)
	require.NoError(t, err)
	// Its send, claimed and recorded by hand (no worker), then bounced.
	claim, err := s.Mirror.ClaimDelivery(context.Background(), mirror.Claim{Key: res[0].DeliveryKey, ReminderID: res[0].ReminderID,
		Purpose: reminder.PurposeReminder, Owner: "test", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, mirror.Claimed, claim.Verdict)
	_, err = s.Mirror.RecordSent(context.Background(), res[0].DeliveryKey, "m-1", nil)
	require.NoError(t, err)
	_, err = s.Mirror.ApplyProviderEvents(context.Background(), []mirror.ProviderEvent{{ID: "b-1",
		DeliveryKey: res[0].DeliveryKey, Outcome: reminder.OutcomeBounce, At: time.Now()}}, time.Hour)
	require.NoError(t, err)

	held, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = s.Mirror.StartDueEscalations(context.Background(), 10, func(context.Context, mirror.OwedEscalation) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer close(release)

	var looks atomic.Int64
	cfg, err := pgxpool.ParseConfig(s.DB.URL)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = countQueries{match: "min(due_at)", n: &looks}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	other := sendgridevents.NewEscalator(mirror.New(pool), s.Temporal, s.TaskQueue)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	other.Run(ctx)
	require.Less(t, looks.Load(), int64(5), "looked %d times in 2 s", looks.Load())
}

// countQueries counts the statements that contain match.
type countQueries struct {
	match string
	n     *atomic.Int64
}

func (c countQueries) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, c.match) {
		c.n.Add(1)
	}
	return ctx
}

func (countQueries) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

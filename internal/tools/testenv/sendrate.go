package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// SendRate holds the provider rate cap's row (send_rate), so a test, not
// the machine's speed, decides where in its steps it finds a notify
// attempt: one that asks for its slot waits on the row until Release.
type SendRate struct {
	db DB
	tx pgx.Tx
}

// HoldSendRate takes the rate cap's row in db's schema; the test's end
// lets it go if Release did not.
func HoldSendRate(t testing.TB, db DB) *SendRate {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatalf("error holding the rate cap's row: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, `
INSERT INTO send_rate (name, next_at) VALUES ('notify', now()) ON CONFLICT (name) DO UPDATE SET next_at = excluded.next_at`); err != nil {
		t.Fatalf("error holding the rate cap's row: %v", err)
	}
	return &SendRate{db: db, tx: tx}
}

// Release lets the waiting attempt take the slot after one wait from now,
// and returns once it has: it then waits for its slot in place.
func (r *SendRate) Release(t testing.TB, wait time.Duration) {
	t.Helper()
	ctx := context.Background()
	var set time.Time
	if err := r.tx.QueryRow(ctx, `
UPDATE send_rate SET next_at = clock_timestamp() + make_interval(secs => $1) WHERE name = 'notify' RETURNING next_at`,
		wait.Seconds()).Scan(&set); err != nil {
		t.Fatalf("error releasing the rate cap's row: %v", err)
	}
	if err := r.tx.Commit(ctx); err != nil {
		t.Fatalf("error releasing the rate cap's row: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var taken bool
		_ = r.db.Pool.QueryRow(ctx, `SELECT next_at > $1 FROM send_rate WHERE name = 'notify'`, set).Scan(&taken)
		if taken {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt did not take its slot within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

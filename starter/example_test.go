package starter_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/shipnotify/shipnotify/codec"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/starter"
	"github.com/shipnotify/shipnotify/workflows"
)

// connect makes a starter as a tracker written in Go would: a Temporal
// client that encrypts every payload with the product's keys (the worker
// refuses plaintext), and the PostgreSQL mirror, whose webhook secrets are
// sealed with the same keys. The addresses and the key file are yours.
func connect(ctx context.Context) *starter.Starter {
	f, err := os.Open("/run/secrets/shipnotify-codec-keys")
	if err != nil {
		log.Fatal(err)
	}
	keys, err := codec.ParseKeys(f)
	f.Close()
	if err != nil {
		log.Fatal(err)
	}
	c, err := codec.New(keys, codec.Options{})
	if err != nil {
		log.Fatal(err)
	}
	temporal, err := client.DialContext(ctx, client.Options{
		HostPort: "temporal:7233", Namespace: "default",
		DataConverter: c.DataConverter(), FailureConverter: c.FailureConverter(),
	})
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, "postgres://shipnotify@postgres:5432/shipnotify")
	if err != nil {
		log.Fatal(err)
	}
	return &starter.Starter{Temporal: temporal, Mirror: mirror.New(pool).SealSecretsWith(c), TaskQueue: workflows.DefaultTaskQueue}
}

// Schedule fans one shipment update out to its subscribers: one reminder
// each, mirrored, then started. Sending the same update again (a retrying
// tracker) schedules nothing twice: each result says whether it was
// scheduled now or already.
func ExampleStarter_Schedule() {
	ctx := context.Background()
	st := connect(ctx)
	f, err := os.Open("update.json") // as in examples/update.json
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	u, err := reminder.ParseUpdate(f)
	if err != nil {
		log.Fatal(err) // names the field that is wrong; nothing was written
	}
	results, err := st.Schedule(ctx, u)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println(r.SubscriberID, r.Status, r.DueAt, r.DeliveryKey)
	}
}

// Cancel stops every reminder of a shipment. One still pending sends
// nothing; a subscriber already reminded gets one cancellation notice.
func ExampleStarter_Cancel() {
	ctx := context.Background()
	st := connect(ctx)
	outcomes, err := st.Cancel(ctx, "", "SHP-1042", starter.Actor{By: "tracker", Reason: "order cancelled"})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outcomes {
		fmt.Println(o.ReminderID, o.Status, o.State)
	}
}

// Decide approves (or rejects) the reminders of an update that wait for an
// approver; one decided already, or expired, is refused with its state.
func ExampleStarter_Decide() {
	ctx := context.Background()
	st := connect(ctx)
	sel := starter.Selection{ShipmentID: "SHP-1042", UpdateID: "window-2026-12-10"}
	outcomes, err := st.Decide(ctx, sel, true, starter.Actor{By: "alice@ops.example", Reason: "window confirmed"})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outcomes {
		fmt.Println(o.ReminderID, o.Status, o.Error)
	}
}

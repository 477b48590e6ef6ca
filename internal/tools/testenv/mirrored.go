package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/workflows"
)

// ScheduleInMirror writes n email reminders of one update of tenant's,
// due in two days, straight into the mirror with their scheduled events,
// no workflow started (for what reads the mirror alone), and returns
// their ids.
func ScheduleInMirror(t testing.TB, store *mirror.Store, tenant, shipment string, n int) []string {
	t.Helper()
	u := reminder.Update{Tenant: tenant, ShipmentID: shipment, UpdateID: "u-1", Kind: "delivery_window",
		Message: reminder.Message{Subject: "s", Text: "t"}}
	for i := range n {
		u.Subscribers = append(u.Subscribers, reminder.Subscriber{ID: fmt.Sprintf("s%04d", i), Channel: reminder.Email,
			Email: "a@customer.example", DueAt: time.Now().Add(48 * time.Hour)})
	}
	rems, err := u.Plan(reminder.PlanOptions{Now: time.Now()})
	if err != nil {
		t.Fatalf("planning %s: %v", shipment, err)
	}
	rows := make([]mirror.NewReminder, len(rems))
	ids := make([]string, len(rems))
	for i, r := range rems {
		rows[i], ids[i] = mirror.NewReminder{Reminder: r, WorkflowID: workflows.ReminderWorkflowID(r.ID)}, r.ID
	}
	if _, err := store.ScheduleUpdate(context.Background(), u, rows); err != nil {
		t.Fatalf("writing %s to the mirror: %v", shipment, err)
	}
	return ids
}

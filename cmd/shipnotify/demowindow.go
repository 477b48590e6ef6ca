package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shipnotify/shipnotify/internal/cli"
	"github.com/shipnotify/shipnotify/reminder"
	"github.com/shipnotify/shipnotify/sendwindow"
	"github.com/shipnotify/shipnotify/starter"
)

// demoNightShipment is the demo's shipment whose one subscriber takes
// reminders in working hours only. It is a shipment of its own so that
// the demo, stopping, can cancel its reminder (a cancel names a shipment)
// without sending the sample's subscribers cancellation notices.
const demoNightShipment = "SHP-1002"

// nightDesk is the night desk's reminder as scheduled, and its window.
type nightDesk struct {
	r starter.Result
	w *reminder.SendWindow
}

// scheduleNightDesk schedules a reminder due at 03:00 in Singapore for a
// subscriber there whose send window is Monday to Friday, 08:00 to 18:00:
// it goes out at the window's next opening, hours after the demo has
// shown everything else, so the demo shows it waiting, and cancels it when
// it stops (cancelNightDesk).
func scheduleNightDesk(ctx context.Context, st *starter.Starter, now time.Time) (nightDesk, error) {
	sgt, err := reminder.LoadTimeZone("Asia/Singapore")
	if err != nil {
		return nightDesk{}, fmt.Errorf("error loading the night desk's zone: %w", err)
	}
	local := now.Add(time.Minute).In(sgt)
	due := time.Date(local.Year(), local.Month(), local.Day(), 3, 0, 0, 0, sgt)
	if due.Before(local) {
		due = due.AddDate(0, 0, 1)
	}
	u := reminder.Update{
		ShipmentID: demoNightShipment,
		UpdateID:   "window-" + now.UTC().Format("20060102-150405"),
		Kind:       "delivery_window",
		Message: reminder.Message{
			Subject: "Delivery window for SHP-1002 opens today",
			Text:    "Shipment SHP-1002 reaches the Jurong dock when the window opens.",
		},
		Subscribers: []reminder.Subscriber{{
			ID: "night-desk", Channel: reminder.Email, Email: "night-desk@consignee.example", DueAt: due,
			Name: "Wei Lin", TimeZone: "Asia/Singapore",
			SendWindow: &reminder.WindowRequest{Window: sendwindow.Window{Days: sendwindow.Weekdays, From: 8 * 60, To: 18 * 60}},
		}},
	}
	rems, err := st.Plan(ctx, u)
	if err != nil {
		return nightDesk{}, err
	}
	results, err := st.SchedulePlanned(ctx, u, rems)
	if err != nil {
		return nightDesk{}, err
	}
	if len(results) != 1 || rems[0].Window == nil {
		return nightDesk{}, errors.New("the night desk's reminder was not scheduled in its window")
	}
	return nightDesk{r: results[0], w: rems[0].Window}, nil
}

// cancelNightDesk cancels the night desk's reminders, this run's and any
// an earlier run left (one killed before it could), so that no workflow
// is left sleeping until a window opens, for a later demo's worker to
// send. They were never sent: a cancel sends nothing.
func cancelNightDesk(ctx context.Context, st *starter.Starter, out *lockedPrinter) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	outcomes, err := st.Cancel(ctx, "", demoNightShipment, starter.Actor{By: "shipnotify demo", Reason: "the demo stopped"})
	if err != nil {
		out.printf("(the night desk's reminder was not cancelled: %v; shipnotify cancel --shipment %s cancels it)\n", err, demoNightShipment)
		return
	}
	n := 0
	for _, o := range outcomes {
		if o.Status == starter.StatusCancelled {
			n++
		}
	}
	out.printf("Cancelled %s waiting for the night desk's window, so the demo leaves none sleeping.\n",
		cli.Count(int64(n), "reminder", "reminders"))
}

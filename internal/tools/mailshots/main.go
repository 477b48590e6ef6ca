// Command mailshots serves the mail sink's mailbox holding shipnotify's own
// letters, for scripts/mail-shots.sh to screenshot in headless Chromium: a
// German reminder in Berlin time and an English escalation with its
// approval links. It prints the sink's URL and the two messages' ids on
// one line, then serves until interrupted. A harness, not the product.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shipnotify/shipnotify/email"
	"github.com/shipnotify/shipnotify/internal/sink"
	"github.com/shipnotify/shipnotify/letters"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mailshots:", err)
		os.Exit(1)
	}
}

func run() error {
	s, err := sink.StartMail("", "SG.mailshots")
	if err != nil {
		return err
	}
	defer s.Close()
	sender := email.NewSender(email.Options{APIKey: "SG.mailshots", BaseURL: s.URL(),
		FromEmail: "reminders@shipnotify.example", FromName: "shipnotify"})
	due := time.Date(2027, 1, 12, 7, 0, 0, 0, time.UTC)
	id := "SHP-1001/window-2027-01-15/consignee-inbox"
	reminder, err := letters.Reminder(letters.Shipment{Name: "Anna Weber",
		Subject:    "Lieferfenster für SHP-1001 öffnet in 3 Tagen",
		Text:       "Sendung SHP-1001 ist am 15. Januar von 08:00 bis 12:00 an Rampe 4 eingeplant.\n\nBitte bringen Sie den Torpass mit. Für einen anderen Termin antworten Sie auf diese E-Mail.",
		ShipmentID: "SHP-1001", UpdateID: "window-2027-01-15", ReminderID: id,
		WindowStart: due.Add(72 * time.Hour), DueAt: due}, letters.Audience{TimeZone: "Europe/Berlin", Locale: "de-DE"})
	if err != nil {
		return err
	}
	escalation, err := letters.Escalate(letters.Escalation{ReminderID: id, ShipmentID: "SHP-1001", UpdateID: "window-2027-01-15",
		SubscriberID: "consignee-inbox", Channel: "email", State: "awaiting_approval", Reason: "approval_timeout", DueAt: due,
		Approve: "http://127.0.0.1:8090/console/link/approve.example", Reject: "http://127.0.0.1:8090/console/link/reject.example",
		LinksExpire: due.Add(48 * time.Hour)})
	if err != nil {
		return err
	}
	var ids []string
	for _, m := range []struct {
		to, name, purpose string
		l                 letters.Letter
	}{{"lead@shipper.example", "", "escalation", escalation}, {"inbox@consignee.example", "Anna Weber", "reminder", reminder}} {
		msgID, err := sender.Send(context.Background(), email.Message{To: m.to, ToName: m.name, Subject: m.l.Subject,
			Text: m.l.Text, HTML: m.l.HTML, DeliveryKey: m.purpose + "|" + id,
			Args: map[string]string{"purpose": m.purpose, "reminder_id": id}})
		if err != nil {
			return err
		}
		ids = append(ids, msgID)
	}
	// The mailbox shows the newest first: the reminder on top.
	fmt.Println(s.URL(), ids[1], ids[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return nil
}

package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/opaque"
	"github.com/shipnotify/shipnotify/mirror"
	"github.com/shipnotify/shipnotify/reminder"
)

// The JSON that list, suppressions list and show print is a contract
// too: the API's wire format (api.Reminder, api.Event, api.Suppression),
// mapped from the mirror's types. These are the bytes main printed before
// the mirror's types lost their JSON tags (issue 36), each optional field
// both present and absent; a change to them is a change to the contract
// (goes_out_at joined it with send windows, issue 39: a reminder without
// one goes out at its due time).
func TestTheCLIsJSONIsAsItWas(t *testing.T) {
	t.Parallel()
	rows, events, sups := wireFixtures()
	var b bytes.Buffer
	writeListJSON(&b, rows, opaque.Development())
	require.Equal(t, listJSON, b.String())

	b.Reset()
	writeSuppressionsJSON(&b, sups)
	require.Equal(t, suppressionsJSON, b.String())

	b.Reset()
	full := showOf(rows[0], events, opaque.Development())
	full.Workflow = workflowStatus{Status: "COMPLETED"}
	require.NoError(t, writeShowJSON(&b, full))
	bare := showOf(rows[1], nil, opaque.Development())
	bare.Workflow = workflowStatus{Status: "NOT_FOUND"}
	require.NoError(t, writeShowJSON(&b, bare))
	require.Equal(t, showJSON, b.String())
}

const listJSON = `{"reminder_id":"acme/S-1/w-1/ops","tenant":"acme","shipment_id":"S-1","update_id":"w-1","subscriber_id":"ops","channel":"email","due_at":"2026-12-08T10:00:00.123456789Z","requested_due_at":"2026-12-08T09:00:00.123456789Z","goes_out_at":"2026-12-08T10:00:00.123456789Z","state":"delivered","delivery_key":"k","workflow_id":"wf","workflow_started_at":"2026-12-08T10:00:01.123456789Z","sent_at":"2026-12-08T10:00:02.123456789Z","cancel_requested_at":"2026-12-08T10:00:03.123456789Z","created_at":"2026-12-08T08:00:00.123456789Z","updated_at":"2026-12-08T10:01:00.123456789Z","provider_outcome":"delivered","provider_outcome_at":"2026-12-08T10:00:04.123456789Z","delivered_at":"2026-12-08T10:00:05.123456789Z"}
{"reminder_id":"S-1/w-1/hook","shipment_id":"S-1","update_id":"w-1","subscriber_id":"hook","channel":"webhook","due_at":"2026-12-08T10:00:00.123456789Z","requested_due_at":"2026-12-08T10:00:00.123456789Z","goes_out_at":"2026-12-08T10:00:00.123456789Z","state":"scheduled","delivery_key":"k2","workflow_id":"wf2","created_at":"2026-12-08T10:00:00.123456789Z","updated_at":"2026-12-08T10:00:00.123456789Z"}
`

const suppressionsJSON = `{"tenant":"acme","address_sha256":"ab12","reason":"unsubscribe","reminder_id":"acme/S-1/w-1/ops","event_id":"sg-1","suppressed_at":"2026-12-08T10:00:00.123456789Z","lifted_at":"2026-12-08T11:00:00.123456789Z","lifted_by":"alice: asked"}
{"tenant":"default","address_sha256":"cd34","reason":"one_click","reminder_id":"S-1/w-1/ops","suppressed_at":"2026-12-08T10:00:00.123456789Z"}
`

const showJSON = `{
  "reminder": {
    "reminder_id": "acme/S-1/w-1/ops",
    "tenant": "acme",
    "shipment_id": "S-1",
    "update_id": "w-1",
    "subscriber_id": "ops",
    "channel": "email",
    "due_at": "2026-12-08T10:00:00.123456789Z",
    "requested_due_at": "2026-12-08T09:00:00.123456789Z",
    "goes_out_at": "2026-12-08T10:00:00.123456789Z",
    "state": "delivered",
    "delivery_key": "k",
    "workflow_id": "wf",
    "workflow_started_at": "2026-12-08T10:00:01.123456789Z",
    "sent_at": "2026-12-08T10:00:02.123456789Z",
    "cancel_requested_at": "2026-12-08T10:00:03.123456789Z",
    "created_at": "2026-12-08T08:00:00.123456789Z",
    "updated_at": "2026-12-08T10:01:00.123456789Z",
    "provider_outcome": "delivered",
    "provider_outcome_at": "2026-12-08T10:00:04.123456789Z",
    "delivered_at": "2026-12-08T10:00:05.123456789Z"
  },
  "events": [
    {
      "id": "evt_LV7-7SbkaQxlhDLTBDQUig",
      "type": "scheduled",
      "at": "2026-12-08T10:00:00.123456789Z",
      "detail": {}
    },
    {
      "id": "evt_dwpVWIeBh0C35BfCOvGVdA",
      "type": "sent",
      "at": "2026-12-08T10:00:01.123456789Z",
      "detail": {
        "attempts": 1,
        "delivery_key": "k"
      }
    }
  ],
  "workflow": {
    "status": "COMPLETED"
  }
}
{
  "reminder": {
    "reminder_id": "S-1/w-1/hook",
    "shipment_id": "S-1",
    "update_id": "w-1",
    "subscriber_id": "hook",
    "channel": "webhook",
    "due_at": "2026-12-08T10:00:00.123456789Z",
    "requested_due_at": "2026-12-08T10:00:00.123456789Z",
    "goes_out_at": "2026-12-08T10:00:00.123456789Z",
    "state": "scheduled",
    "delivery_key": "k2",
    "workflow_id": "wf2",
    "created_at": "2026-12-08T10:00:00.123456789Z",
    "updated_at": "2026-12-08T10:00:00.123456789Z"
  },
  "events": null,
  "workflow": {
    "status": "NOT_FOUND"
  }
}
`

// wireFixtures are a reminder with every field set and one with none of
// its optional ones, a trail, and two suppressions.
func wireFixtures() ([]mirror.Row, []mirror.Event, []mirror.Suppression) {
	at := time.Date(2026, 12, 8, 10, 0, 0, 123456789, time.UTC)
	p := func(d time.Duration) *time.Time { v := at.Add(d); return &v }
	rows := []mirror.Row{{
		ID: "acme/S-1/w-1/ops", Tenant: "acme", ShipmentID: "S-1", UpdateID: "w-1", SubscriberID: "ops",
		Channel: reminder.Email, DueAt: at, RequestedDueAt: at.Add(-time.Hour), State: reminder.Delivered, DeliveryKey: "k",
		WorkflowID: "wf", WorkflowStartedAt: p(time.Second), SentAt: p(2 * time.Second), CancelRequestedAt: p(3 * time.Second),
		CreatedAt: at.Add(-2 * time.Hour), UpdatedAt: at.Add(time.Minute), ProviderOutcome: reminder.OutcomeDelivered,
		ProviderOutcomeAt: p(4 * time.Second), DeliveredAt: p(5 * time.Second),
	}, {
		ID: "S-1/w-1/hook", ShipmentID: "S-1", UpdateID: "w-1", SubscriberID: "hook", Channel: reminder.Webhook,
		DueAt: at, RequestedDueAt: at, State: reminder.Scheduled, DeliveryKey: "k2", WorkflowID: "wf2", CreatedAt: at, UpdatedAt: at,
	}}
	events := []mirror.Event{
		{ID: 7, Type: "scheduled", At: at, Detail: map[string]any{}},
		{ID: 8, Type: "sent", At: at.Add(time.Second), Detail: map[string]any{"attempts": 1.0, "delivery_key": "k"}},
	}
	sups := []mirror.Suppression{
		{Tenant: "acme", AddressSHA256: "ab12", Reason: "unsubscribe", ReminderID: "acme/S-1/w-1/ops", EventID: "sg-1",
			SuppressedAt: at, LiftedAt: p(time.Hour), LiftedBy: "alice: asked"},
		{Tenant: "default", AddressSHA256: "cd34", Reason: "one_click", ReminderID: "S-1/w-1/ops", SuppressedAt: at},
	}
	return rows, events, sups
}

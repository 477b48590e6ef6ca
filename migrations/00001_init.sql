-- The mirror: PostgreSQL's copy of every reminder's state, its audit trail and
-- the claims that make delivery idempotent. Temporal holds the timers; these
-- tables are the schedule of record that operators query and export.

-- +goose Up

-- One row per shipment update: what every subscriber of it is told.
CREATE TABLE updates (
    shipment_id  text        NOT NULL,
    update_id    text        NOT NULL,
    kind         text        NOT NULL,
    window_start timestamptz,
    subject      text        NOT NULL,
    body         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (shipment_id, update_id)
);

-- One row per (update, subscriber): the unit of delivery.
CREATE TABLE reminders (
    id                  text        PRIMARY KEY,
    shipment_id         text        NOT NULL,
    update_id           text        NOT NULL,
    subscriber_id       text        NOT NULL,
    channel             text        NOT NULL CHECK (channel IN ('email', 'webhook')),
    email               text,
    webhook_url         text,
    webhook_secret      text,
    due_at              timestamptz NOT NULL,
    state               text        NOT NULL DEFAULT 'scheduled'
        CHECK (state IN ('scheduled', 'awaiting_approval', 'sent', 'failed', 'cancelled', 'expired')),
    -- The key of the delivery at the current due time; it changes with it.
    delivery_key        text        NOT NULL,
    workflow_id         text        NOT NULL UNIQUE,
    -- Set once Temporal accepted the workflow; NULL rows are the reconciler's.
    workflow_started_at timestamptz,
    sent_at             timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (shipment_id, update_id) REFERENCES updates (shipment_id, update_id),
    -- Also the "by shipment" index: lookups by shipment_id use its prefix.
    UNIQUE (shipment_id, update_id, subscriber_id),
    CHECK ((channel = 'email' AND email IS NOT NULL AND webhook_url IS NULL)
        OR (channel = 'webhook' AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL AND email IS NULL))
);

-- "What reminders do we owe next Tuesday?": due between two times, any or one state.
CREATE INDEX reminders_due_at_idx ON reminders (due_at);
CREATE INDEX reminders_state_due_at_idx ON reminders (state, due_at);

-- Append-only audit trail of every state change.
CREATE TABLE reminder_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    reminder_id text        NOT NULL REFERENCES reminders (id),
    type        text        NOT NULL CHECK (type ~ '^[a-z][a-z_]*$'),
    at          timestamptz NOT NULL DEFAULT now(),
    detail      jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX reminder_events_reminder_idx ON reminder_events (reminder_id, id);

-- +goose StatementBegin
CREATE FUNCTION reminder_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reminder_events is append-only';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER reminder_events_append_only
    BEFORE UPDATE OR DELETE ON reminder_events
    FOR EACH ROW EXECUTE FUNCTION reminder_events_append_only();
CREATE TRIGGER reminder_events_no_truncate
    BEFORE TRUNCATE ON reminder_events
    FOR EACH STATEMENT EXECUTE FUNCTION reminder_events_append_only();

-- One row per delivery key: claimed before the provider is called, so a
-- second execution for the same key finds it and does not send again.
CREATE TABLE deliveries (
    delivery_key        text        PRIMARY KEY,
    reminder_id         text        NOT NULL REFERENCES reminders (id),
    purpose             text        NOT NULL CHECK (purpose IN ('reminder', 'cancellation', 'escalation')),
    status              text        NOT NULL CHECK (status IN ('sending', 'sent', 'failed')),
    -- Who holds a 'sending' claim and until when; a crashed holder's claim
    -- is taken over by its own retry or once the lease runs out.
    claimed_by          text        NOT NULL,
    lease_until         timestamptz NOT NULL,
    attempts            integer     NOT NULL DEFAULT 1,
    provider_message_id text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz
);
CREATE INDEX deliveries_reminder_idx ON deliveries (reminder_id);

-- +goose Down
DROP TABLE deliveries;
DROP TABLE reminder_events;
DROP FUNCTION reminder_events_append_only();
DROP TABLE reminders;
DROP TABLE updates;

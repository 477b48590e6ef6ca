-- What the mail provider reported after it accepted a reminder.
--
-- A 202 from SendGrid means "accepted", not "reached the subscriber". Its
-- Event Webhook reports, per delivery key, processed, deferred, delivered,
-- bounce, dropped, spamreport and unsubscribe; `shipnotify serve` verifies
-- those batches and applies them here (mirror.ApplyProviderEvents).
--
-- States after the send:
--
--   sent ──delivered──▶ delivered ──bounce/dropped──▶ undeliverable
--     └───────────────bounce/dropped────────────────────────▲
--
-- A webhook reminder is delivered when its receiver answers 2xx: it goes
-- straight to delivered. An email stays sent until SendGrid says
-- delivered, bounce or dropped; deferred, processed, spamreport and
-- unsubscribe change only the last outcome reported. undeliverable is
-- final: a late delivered event does not undo a bounce. A bounce or drop
-- escalates once; so does a deferral not delivered within
-- SHIPNOTIFY_DEFERRED_ESCALATE_AFTER.
--
-- Events can arrive before the send is recorded (SendGrid is quick, and a
-- record can be retried): the outcome columns are kept whatever the state,
-- and recording the send derives the state from them
-- (reminder_state_after_send).

-- On a large mirror nothing here reads the whole table while writers wait:
-- the CHECK constraints are added NOT VALID (new and changed rows are
-- checked at once) and 00008 validates them, and builds the new index,
-- without holding writers back.

-- +goose Up
ALTER TABLE reminders DROP CONSTRAINT reminders_state_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_state_check
    CHECK (state IN ('scheduled', 'awaiting_approval', 'sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired'))
    NOT VALID;

ALTER TABLE reminders
    -- The provider's last report and its timestamp (the provider's clock).
    ADD COLUMN provider_outcome    text,
    ADD COLUMN provider_outcome_at timestamptz,
    -- When the subscriber got it: SendGrid's delivered timestamp, or the
    -- webhook receiver's 2xx.
    ADD COLUMN delivered_at        timestamptz,
    -- SendGrid's first bounce or drop of it.
    ADD COLUMN undeliverable_at    timestamptz,
    -- Set when an email is accepted, cleared by its final outcome: the
    -- oldest of these is the delivery side's oldest-overdue gauge. Rows
    -- sent before this migration have none, so they never count.
    ADD COLUMN awaiting_outcome_since timestamptz,
    ADD CONSTRAINT reminders_provider_outcome_check
        CHECK (provider_outcome IN ('processed', 'deferred', 'delivered', 'bounce', 'dropped', 'spamreport', 'unsubscribe'))
        NOT VALID;

-- The state a reminder takes when its send is recorded, from the outcome
-- already reported (if any) and its channel.
-- +goose StatementBegin
CREATE FUNCTION reminder_state_after_send(channel text, delivered_at timestamptz, undeliverable_at timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
SELECT CASE WHEN undeliverable_at IS NOT NULL THEN 'undeliverable'
            WHEN channel = 'webhook' OR delivered_at IS NOT NULL THEN 'delivered'
            ELSE 'sent' END
$$;
-- +goose StatementEnd

-- One row per provider event applied: SendGrid retries a batch it did not
-- see answered 2xx, and a repeated event id finds its row and changes
-- nothing. Kept until prune removes the reminder (SendGrid retries for 24
-- hours; prune's minimum age is 4 days).
CREATE TABLE provider_events (
    event_id    text        PRIMARY KEY,
    reminder_id text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_events_reminder_idx ON provider_events (reminder_id);

-- The escalations provider outcomes owe, written in the transaction that
-- applies the outcome (an outbox): serve starts one workflow per row once
-- due_at passes, and marks it started. The key makes each reason escalate
-- once per reminder however often its event arrives. A deferral delivered
-- (or bounced) before its due time is settled instead.
CREATE TABLE outcome_escalations (
    reminder_id text        NOT NULL REFERENCES reminders (id),
    reason      text        NOT NULL CHECK (reason IN ('undeliverable', 'delivery_deferred')),
    due_at      timestamptz NOT NULL,
    detail      text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    settled_at  timestamptz,
    PRIMARY KEY (reminder_id, reason)
);
CREATE INDEX outcome_escalations_due_idx ON outcome_escalations (due_at)
    WHERE started_at IS NULL AND settled_at IS NULL;

-- Prune's notion of finished gains the two new states.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    SELECT p.reminder_id INTO refused
      FROM pruned p LEFT JOIN reminders r ON r.id = p.reminder_id
     WHERE p.at >= now() - interval '4 days'
        OR r.id IS NULL
        OR r.state NOT IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired')
        OR r.updated_at >= now() - interval '4 days'
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'reminder_events: prune deletes only the events, 4 days old, of a reminder finished and unchanged for 4 days (not reminder %)', refused;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminders_prune_candidates(age_secs float8, after_due timestamptz, after_id text, n int)
RETURNS TABLE (id text, due_at timestamptz) LANGUAGE sql SECURITY DEFINER AS $$
SELECT r.id, r.due_at FROM reminders r
 WHERE age_secs >= 4 * 86400
   AND r.due_at < now() - make_interval(secs => age_secs)
   AND (r.due_at, r.id) > (after_due, after_id)
   AND r.state IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired')
   AND r.updated_at < now() - make_interval(secs => age_secs)
 ORDER BY r.due_at, r.id
 LIMIT n
   FOR UPDATE OF r SKIP LOCKED
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    -- CREATE OR REPLACE resets the definer's search_path, which 00006 pinned.
    EXECUTE format('ALTER FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) SET search_path = %I, pg_temp',
                   current_schema());
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        GRANT SELECT, INSERT, UPDATE ON provider_events, outcome_escalations TO shipnotify_runtime;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_pruner') THEN
        GRANT SELECT, DELETE ON provider_events, outcome_escalations TO shipnotify_pruner;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        REVOKE ALL ON provider_events, outcome_escalations FROM shipnotify_runtime;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_pruner') THEN
        REVOKE ALL ON provider_events, outcome_escalations FROM shipnotify_pruner;
    END IF;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminders_prune_candidates(age_secs float8, after_due timestamptz, after_id text, n int)
RETURNS TABLE (id text, due_at timestamptz) LANGUAGE sql SECURITY DEFINER AS $$
SELECT r.id, r.due_at FROM reminders r
 WHERE age_secs >= 4 * 86400
   AND r.due_at < now() - make_interval(secs => age_secs)
   AND (r.due_at, r.id) > (after_due, after_id)
   AND r.state IN ('sent', 'failed', 'cancelled', 'expired')
   AND r.updated_at < now() - make_interval(secs => age_secs)
 ORDER BY r.due_at, r.id
 LIMIT n
   FOR UPDATE OF r SKIP LOCKED
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    SELECT p.reminder_id INTO refused
      FROM pruned p LEFT JOIN reminders r ON r.id = p.reminder_id
     WHERE p.at >= now() - interval '4 days'
        OR r.id IS NULL
        OR r.state NOT IN ('sent', 'failed', 'cancelled', 'expired')
        OR r.updated_at >= now() - interval '4 days'
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'reminder_events: prune deletes only the events, 4 days old, of a reminder finished and unchanged for 4 days (not reminder %)', refused;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TABLE outcome_escalations;
DROP TABLE provider_events;
DROP FUNCTION reminder_state_after_send(text, timestamptz, timestamptz);
DROP INDEX IF EXISTS reminders_awaiting_outcome_idx; -- 00008's, if its Down did not run
ALTER TABLE reminders
    DROP CONSTRAINT reminders_provider_outcome_check,
    DROP COLUMN awaiting_outcome_since,
    DROP COLUMN undeliverable_at,
    DROP COLUMN delivered_at,
    DROP COLUMN provider_outcome_at,
    DROP COLUMN provider_outcome;
-- Down fails while a reminder is delivered or undeliverable: their rows
-- would lose what happened to them.
ALTER TABLE reminders DROP CONSTRAINT reminders_state_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_state_check
    CHECK (state IN ('scheduled', 'awaiting_approval', 'sent', 'failed', 'cancelled', 'expired'));

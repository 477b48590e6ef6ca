-- +goose NO TRANSACTION

-- Suppressions: an address that unsubscribed or reported spam to a
-- tracker's mail gets none of that tracker's reminders again until an
-- operator lifts it (shipnotify suppressions remove).
--
-- SendGrid's Event Webhook reports unsubscribe and spamreport, and drops
-- mail to an address on its own unsubscribe or spam report list ("dropped",
-- reason "Unsubscribed Address" or "Spam Reporting Address"); serve's
-- one-click link (RFC 8058) reports the same. Each adds a row here, keyed
-- by the reminder's tenant and its address's SHA-256, lower-cased and
-- trimmed (suppression_address): a suppression outlives the reminders
-- prune removes, and keeps no address of its own. The notify activity
-- refuses a reminder whose address is suppressed for its tenant, and it
-- ends suppressed: a new final state, which a reminder reaches from a
-- pending state (at its send) or from sent (an opt-out drop), and which
-- escalates nothing. The state's lists below are reminder/states.go's and
-- reminder/events.go's, tested against them.
--
-- Every statement stands alone and may run again: a failure part way is
-- finished by running the migration again. The CHECK constraint is
-- replaced in one statement, NOT VALID (new and changed rows are checked
-- at once), then validated by a read that lets writers go on.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION suppression_address(address text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT encode(sha256(convert_to(lower(btrim(address)), 'UTF8')), 'hex')
$$;
-- +goose StatementEnd

CREATE TABLE IF NOT EXISTS suppressions (
    tenant         text        NOT NULL,
    address_sha256 text        NOT NULL CHECK (address_sha256 ~ '^[0-9a-f]{64}$'),
    -- What suppressed it: SendGrid's unsubscribe, spamreport or an
    -- opt-out drop, or the one-click link.
    reason         text        NOT NULL CHECK (reason IN ('unsubscribe', 'spamreport', 'dropped', 'one_click')),
    -- The reminder whose report suppressed it, and the provider's event id
    -- (kept after prune removes the reminder: no foreign key).
    reminder_id    text        NOT NULL,
    event_id       text,
    suppressed_at  timestamptz NOT NULL DEFAULT now(),
    -- Set when an operator lifts it; a later opt-out suppresses it again.
    lifted_at      timestamptz,
    lifted_by      text,
    PRIMARY KEY (tenant, address_sha256)
);

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        GRANT SELECT, INSERT, UPDATE ON suppressions TO shipnotify_runtime;
    END IF;
END
$$;
-- +goose StatementEnd

ALTER TABLE reminders DROP CONSTRAINT IF EXISTS reminders_state_check, ADD CONSTRAINT reminders_state_check
    CHECK (state IN ('scheduled', 'awaiting_approval', 'sent', 'delivered', 'undeliverable', 'failed', 'cancelled',
                     'expired', 'suppressed'))
    NOT VALID;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_state_check;

-- 00013's, with suppressed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_move_allowed(from_state text, to_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
SELECT (from_state IN ('scheduled', 'awaiting_approval')
        AND to_state IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired', 'suppressed'))
    OR (from_state = 'awaiting_approval' AND to_state = 'scheduled')
    OR (from_state = 'sent' AND to_state IN ('delivered', 'undeliverable', 'suppressed'))
    OR (from_state = 'delivered' AND to_state = 'undeliverable')
$$;
-- +goose StatementEnd

-- 00019's, with the suppressed event.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_event_into(type text, detail jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN type = 'approved' THEN 'scheduled'
    WHEN type IN ('rejected', 'cancelled') THEN 'cancelled'
    WHEN type IN ('expired', 'failed', 'sent', 'delivered', 'undeliverable', 'suppressed') THEN type
    WHEN type = 'scheduled' THEN coalesce(reminder_event_text(detail, 'state'), 'scheduled')
    WHEN type = 'repaired' THEN nullif(reminder_event_text(detail, 'to'), reminder_event_text(detail, 'from'))
    WHEN starts_with(type, 'provider_') THEN reminder_event_text(detail, 'state')
END
$$;
-- +goose StatementEnd

-- 00019's, with suppressed among the finished.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    WITH finished AS (
        SELECT q.reminder_id FROM pruned q JOIN reminders r ON r.id = q.reminder_id
         WHERE reminder_event_reaches(q.type, q.detail, r.state)
    )
    SELECT p.reminder_id INTO refused
      FROM pruned p LEFT JOIN reminders r ON r.id = p.reminder_id
     WHERE p.at >= now() - interval '4 days'
        OR r.id IS NULL
        OR r.state NOT IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired', 'suppressed')
        OR r.updated_at >= now() - interval '4 days'
        OR (p.reminder_id NOT IN (SELECT reminder_id FROM finished)
            AND NOT EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                               AND reminder_event_reaches(e.type, e.detail, r.state)))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'reminder_events: prune deletes only the events, 4 days old, of a reminder finished and unchanged for 4 days whose trail records its finish (not reminder %)', refused;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- 00019's, with suppressed among the finished.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminders_prune_candidates(age_secs float8, after_due timestamptz, after_id text, n int)
RETURNS TABLE (id text, due_at timestamptz) LANGUAGE sql SECURITY DEFINER AS $$
SELECT r.id, r.due_at FROM reminders r
 WHERE age_secs >= 4 * 86400
   AND r.due_at < now() - make_interval(secs => age_secs)
   AND (r.due_at, r.id) > (after_due, after_id)
   AND r.state IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired', 'suppressed')
   AND r.updated_at < now() - make_interval(secs => age_secs)
   AND EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                  AND reminder_event_reaches(e.type, e.detail, r.state))
 ORDER BY r.due_at, r.id
 LIMIT n
   FOR UPDATE OF r SKIP LOCKED
$$;
-- +goose StatementEnd

-- CREATE OR REPLACE resets a function's settings: both are pinned again.
-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['reminders_prune_candidates(float8, timestamptz, text, int)', 'reminder_events_prunable()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Suppressed reminders have no state to go back to: they are cancelled
-- (by the owner, whom the state machine's trigger trusts), with a note.
-- +goose StatementBegin
DO $$
BEGIN
    INSERT INTO reminder_events (reminder_id, type, detail)
    SELECT id, 'repaired', jsonb_build_object('from', 'suppressed', 'to', 'cancelled', 'by', 'migration 00022 down')
      FROM reminders WHERE state = 'suppressed';
    UPDATE reminders SET state = 'cancelled', updated_at = now() WHERE state = 'suppressed';
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
   AND EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                  AND reminder_event_reaches(e.type, e.detail, r.state))
 ORDER BY r.due_at, r.id
 LIMIT n
   FOR UPDATE OF r SKIP LOCKED
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    refused text;
BEGIN
    WITH finished AS (
        SELECT q.reminder_id FROM pruned q JOIN reminders r ON r.id = q.reminder_id
         WHERE reminder_event_reaches(q.type, q.detail, r.state)
    )
    SELECT p.reminder_id INTO refused
      FROM pruned p LEFT JOIN reminders r ON r.id = p.reminder_id
     WHERE p.at >= now() - interval '4 days'
        OR r.id IS NULL
        OR r.state NOT IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired')
        OR r.updated_at >= now() - interval '4 days'
        OR (p.reminder_id NOT IN (SELECT reminder_id FROM finished)
            AND NOT EXISTS (SELECT 1 FROM reminder_events e WHERE e.reminder_id = r.id
                               AND reminder_event_reaches(e.type, e.detail, r.state)))
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'reminder_events: prune deletes only the events, 4 days old, of a reminder finished and unchanged for 4 days whose trail records its finish (not reminder %)', refused;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['reminders_prune_candidates(float8, timestamptz, text, int)', 'reminder_events_prunable()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_event_into(type text, detail jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN type = 'approved' THEN 'scheduled'
    WHEN type IN ('rejected', 'cancelled') THEN 'cancelled'
    WHEN type IN ('expired', 'failed', 'sent', 'delivered', 'undeliverable') THEN type
    WHEN type = 'scheduled' THEN coalesce(reminder_event_text(detail, 'state'), 'scheduled')
    WHEN type = 'repaired' THEN nullif(reminder_event_text(detail, 'to'), reminder_event_text(detail, 'from'))
    WHEN starts_with(type, 'provider_') THEN reminder_event_text(detail, 'state')
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_move_allowed(from_state text, to_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
SELECT (from_state IN ('scheduled', 'awaiting_approval')
        AND to_state IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired'))
    OR (from_state = 'awaiting_approval' AND to_state = 'scheduled')
    OR (from_state = 'sent' AND to_state IN ('delivered', 'undeliverable'))
    OR (from_state = 'delivered' AND to_state = 'undeliverable')
$$;
-- +goose StatementEnd
ALTER TABLE reminders DROP CONSTRAINT reminders_state_check, ADD CONSTRAINT reminders_state_check
    CHECK (state IN ('scheduled', 'awaiting_approval', 'sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired'))
    NOT VALID;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_state_check;
DROP TABLE suppressions;
DROP FUNCTION suppression_address(text);

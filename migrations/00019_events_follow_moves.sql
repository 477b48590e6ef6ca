-- The audit trail follows the reminder's moves, and prune trusts the
-- trail, not the row.
--
-- For a role that does not own the tables (the runtime role), an event
-- that records a move (approved, sent, cancelled, ...; the list and the
-- move each records are reminder/events.go's, whose SQL twins below are
-- tested against it) is taken only in the transaction that made that
-- move to that reminder: reminders_guard records each move in columns the
-- caller cannot set (last_move_from, last_move_xact), and
-- reminder_events_follow_moves checks the event against them. A forged
-- "approved by alice" on a reminder nobody approved is refused. Notes
-- (rescheduled, escalation_failed, cancelled_late, ...) are taken as
-- before. A reminder the runtime role inserts starts pending.
--
-- Prune takes a finished reminder only when its trail holds an event
-- recording its move into the state it is in (reminder_event_reaches): a
-- row moved by hand with no event stays, however old. The events already
-- written are taken as written.
--
-- Neither a setting (set_config) nor a temporary table can carry trust:
-- the runtime role writes both. So every function that decides trust
-- resolves names in this schema (and pg_catalog) only, with pg_temp last:
-- 00013's caller_owns read pg_class through the caller's path, where a
-- temporary table named pg_class came first and made any caller the owner.
--
-- Columns are added without a default (metadata only), so nothing here
-- reads the table while writers wait.

-- +goose Up
ALTER TABLE reminders
    -- The state the reminder's last move by a non-owner left (NULL: it
    -- was inserted), and that move's transaction.
    ADD COLUMN last_move_from text,
    ADD COLUMN last_move_xact xid8;

-- detail's string under key (NULL for any other JSON value).
-- +goose StatementBegin
CREATE FUNCTION reminder_event_text(detail jsonb, key text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT CASE WHEN jsonb_typeof(detail -> key) = 'string' THEN detail ->> key END
$$;
-- +goose StatementEnd

-- reminder.EventInto: the state an event says its reminder moved into;
-- NULL for a note.
-- +goose StatementBegin
CREATE FUNCTION reminder_event_into(type text, detail jsonb) RETURNS text
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

-- reminder.EventReaches: the event records a move into state, or into a
-- state handed to the provider that state follows from.
-- +goose StatementBegin
CREATE FUNCTION reminder_event_reaches(type text, detail jsonb, state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
SELECT coalesce(reminder_event_into(type, detail) = state
                OR (reminder_event_into(type, detail) IN ('sent', 'delivered', 'undeliverable')
                    AND reminder_move_allowed(reminder_event_into(type, detail), state)), false)
$$;
-- +goose StatementEnd

-- reminder.EventFollows: the event may follow its reminder's move from
-- from_state (NULL: inserted) to to_state in the same transaction.
-- +goose StatementBegin
CREATE FUNCTION reminder_event_follows(type text, detail jsonb, from_state text, to_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
SELECT reminder_event_into(type, detail) IS NULL
    OR (coalesce(CASE
            WHEN type = 'scheduled' THEN from_state IS NULL
            ELSE reminder_move_allowed(from_state, reminder_event_into(type, detail))
                 AND (type NOT IN ('approved', 'rejected') OR from_state = 'awaiting_approval')
                 AND (type <> 'repaired' OR from_state = reminder_event_text(detail, 'from'))
        END, false)
        AND reminder_event_reaches(type, detail, to_state))
$$;
-- +goose StatementEnd

-- 00013's, reading pg_catalog's pg_class whatever the caller's path.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION caller_owns(rel oid) RETURNS boolean LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
SELECT pg_catalog.pg_has_role(current_user, (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = rel), 'USAGE')
$$;
-- +goose StatementEnd

-- 00013's, which also records a non-owner's moves and starts its
-- reminders pending.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminders_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF caller_owns(TG_RELID) THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        IF NEW.state NOT IN ('scheduled', 'awaiting_approval') THEN
            RAISE EXCEPTION 'a reminder starts scheduled or awaiting_approval, not %', NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.created_at := now();
        NEW.updated_at := now();
        NEW.last_move_from := NULL;
        NEW.last_move_xact := pg_current_xact_id();
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT reminder_move_allowed(OLD.state, NEW.state) THEN
            RAISE EXCEPTION 'a % reminder may not become %', OLD.state, NEW.state USING ERRCODE = 'check_violation';
        END IF;
        NEW.last_move_from := OLD.state;
        NEW.last_move_xact := pg_current_xact_id();
    ELSE
        NEW.last_move_from := OLD.last_move_from;
        NEW.last_move_xact := OLD.last_move_xact;
    END IF;
    IF NEW.updated_at IS DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    NEW.created_at := OLD.created_at;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION reminder_events_follow_moves() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    IF reminder_event_into(NEW.type, NEW.detail) IS NULL OR caller_owns(TG_RELID) THEN
        RETURN NEW;
    END IF;
    SELECT state, last_move_from, last_move_xact INTO r FROM reminders WHERE id = NEW.reminder_id;
    IF NOT FOUND THEN
        RETURN NEW; -- the foreign key refuses it
    END IF;
    IF r.last_move_xact IS DISTINCT FROM pg_current_xact_id()
       OR NOT reminder_event_follows(NEW.type, NEW.detail, r.last_move_from, r.state) THEN
        RAISE EXCEPTION 'reminder_events: an event of type % records a move that reminder % did not make in this transaction (it is %)',
            NEW.type, NEW.reminder_id, r.state USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER reminder_events_follow_moves BEFORE INSERT ON reminder_events
    FOR EACH ROW EXECUTE FUNCTION reminder_events_follow_moves();

-- 00007's, which also wants the trail to record the finish of every
-- reminder whose events go: among the events deleted (prune's case, found
-- in one pass) or, failing that, among those kept.
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

-- 00007's, which also wants the trail to record the finish.
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
DO $$
DECLARE
    f text;
BEGIN
    -- CREATE OR REPLACE resets a function's settings: prune's definer
    -- function is pinned again, and every trigger that decides trust is
    -- pinned to this schema, pg_temp last.
    FOREACH f IN ARRAY ARRAY['reminders_prune_candidates(float8, timestamptz, text, int)', 'reminders_guard()',
                             'reminder_events_follow_moves()', 'reminder_events_time()', 'reminder_events_prunable()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
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
ALTER FUNCTION reminder_events_time() RESET search_path;
DROP TRIGGER reminder_events_follow_moves ON reminder_events;
DROP FUNCTION reminder_events_follow_moves();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminders_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF caller_owns(TG_RELID) THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'INSERT' THEN
        NEW.created_at := now();
        NEW.updated_at := now();
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state AND NOT reminder_move_allowed(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'a % reminder may not become %', OLD.state, NEW.state USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.updated_at IS DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    NEW.created_at := OLD.created_at;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION caller_owns(rel oid) RETURNS boolean LANGUAGE sql STABLE AS $$
SELECT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = rel), 'USAGE')
$$;
-- +goose StatementEnd
DROP FUNCTION reminder_event_follows(text, jsonb, text, text);
DROP FUNCTION reminder_event_reaches(text, jsonb, text);
DROP FUNCTION reminder_event_into(text, jsonb);
DROP FUNCTION reminder_event_text(jsonb, text);
ALTER TABLE reminders DROP COLUMN last_move_xact, DROP COLUMN last_move_from;

-- Status events back to the tracker: a transactional outbox, and the
-- change feed of GET /v1/reminders?updated_since=.
--
-- Every state change of a reminder writes its audit trail event in the
-- transaction that makes the change (00019 holds the runtime role to
-- that). The trigger below turns each trail event that is a status event
-- (reminder/status.go; reminder_status_event is its SQL twin, tested
-- against it) into
--   * one row in status_outbox per endpoint of the reminder's tenant that
--     takes that event type: the body to post, rendered now, with the
--     event's stable id (evt_ and the trail event's id). serve's relay
--     posts the rows, in order per reminder and endpoint, signed;
--   * the reminder's row in reminder_changes: its latest status event and
--     that event's position in the feed (the writing transaction's id and
--     the trail event's), which GET /v1/reminders?updated_since= pages by.
-- Both are written in the trail event's transaction, so a change and its
-- status event are committed together or not at all, on every path that
-- writes the trail, whoever writes it.
--
-- The trigger runs as the owner (SECURITY DEFINER, its names resolved in
-- this schema only): the runtime role may read the outbox and mark its
-- rows delivered, never insert one or rewrite what a row says, so every
-- event a tracker receives comes from the trail.
--
-- A reminder's status events are numbered (seq) in the order their
-- transactions commit: the upsert of its reminder_changes row holds that
-- row until commit, so the next event's number is taken only after the
-- one before is committed. The relay posts a reminder's next row only
-- once the one before is delivered or given up.
--
-- The feed's position is (xact, event_id). Transaction ids are assigned
-- before commit, and commit in any order, so a reader that handed out
-- every committed position would skip one that commits late below it.
-- A reader hands out only positions whose transaction is older than its
-- snapshot's xmin (every transaction below xmin has ended, and every
-- later one gets an id at or above it), so no position it passes can
-- still appear. A long transaction anywhere in the cluster holds the feed
-- back for as long as it runs, and loses nothing.
--
-- Endpoints are serve's configuration (SHIPNOTIFY_STATUS_ENDPOINTS_FILE);
-- serve registers them here as it starts, so the trigger knows whom each
-- event is for. The table keeps no URL or secret: a hash of the URL, to
-- tell a new URL from the one a 410 disabled.
--
-- Locks: the new tables' foreign keys to reminders take a SHARE ROW
-- EXCLUSIVE lock on reminders, and the trigger one on reminder_events,
-- each held until this migration commits (the tables are new and empty,
-- so that is a moment); nothing here reads or rewrites their rows. A
-- writer that holds either table in an open transaction would make this
-- wait for it, and every other writer wait behind this: lock_timeout
-- gives up after 5 s instead, with nothing applied (one transaction), and
-- `shipnotify migrate` may simply be run again.

-- +goose Up
SET LOCAL lock_timeout = '5s';

-- reminder.StatusOf: the status event a trail event of type with detail
-- makes, written while its reminder is in state; NULL for none.
-- +goose StatementBegin
CREATE FUNCTION reminder_status_event(type text, detail jsonb, state text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN type IN ('scheduled', 'approved', 'rejected', 'rescheduled') THEN type
    WHEN type = 'escalation_sent' THEN 'escalated'
    WHEN type = 'cancellation_sent' THEN 'cancelled'
    WHEN type = 'cancelled_late' THEN CASE WHEN state IN ('sent', 'delivered', 'undeliverable') THEN 'cancelled' END
    WHEN reminder_event_into(type, detail) = 'scheduled' THEN 'approved'
    WHEN reminder_event_into(type, detail) IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired', 'suppressed')
        THEN reminder_event_into(type, detail)
END
$$;
-- +goose StatementEnd

-- The tracker's endpoints, as serve's configuration names them.
CREATE TABLE status_endpoints (
    name            text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    -- The tenant whose events it receives ('' the default tenant).
    tenant          text        NOT NULL,
    -- The status event types it takes.
    events          text[]      NOT NULL,
    url_sha256      text        NOT NULL,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    -- No longer in serve's configuration: no event is written for it.
    retired_at      timestamptz,
    -- It answered 410 Gone: nothing more is written or posted to it until
    -- an operator retries it (or its URL changes).
    disabled_at     timestamptz,
    disabled_reason text,
    -- The current run of failures (a receiver down, 5xx, 429): every row
    -- of the endpoint waits until retry_at, the run's backoff.
    failures        integer     NOT NULL DEFAULT 0,
    failing_since   timestamptz,
    retry_at        timestamptz
);

-- One status event for one endpoint.
CREATE TABLE status_outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint        text        NOT NULL REFERENCES status_endpoints (name),
    reminder_id     text        NOT NULL REFERENCES reminders (id),
    -- The reminder's status event number, 1 for its first.
    seq             integer     NOT NULL,
    -- The event's stable id: webhook-id, the same on every attempt and
    -- every endpoint.
    event_id        text        NOT NULL,
    type            text        NOT NULL,
    payload         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'given_up')),
    attempts        integer     NOT NULL DEFAULT 0,
    -- A row the receiver refused (4xx) waits until then; 5xx and
    -- unanswered attempts back off the whole endpoint instead.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- The relay posting it, until when: another relay passes it over.
    claimed_by      text,
    lease_until     timestamptz,
    last_status     integer,
    last_error      text,
    finished_at     timestamptz,
    UNIQUE (reminder_id, endpoint, seq)
);
-- The relay's queue: an endpoint's pending rows in order; and the rows
-- given up, for the operator (delivered rows, the many, are read by
-- reminder only, through the unique key).
CREATE INDEX status_outbox_pending_idx ON status_outbox (endpoint, id) WHERE status = 'pending';
CREATE INDEX status_outbox_given_up_idx ON status_outbox (endpoint, id) WHERE status = 'given_up';

-- Each reminder's latest status event and its position in the feed: the
-- reminder's own, gone with it.
CREATE TABLE reminder_changes (
    reminder_id    text        PRIMARY KEY REFERENCES reminders (id) ON DELETE CASCADE,
    tenant         text        NOT NULL,
    seq            integer     NOT NULL,
    xact           xid8        NOT NULL,
    event_id       bigint      NOT NULL,
    type           text        NOT NULL,
    -- The state the event left, and the one the event before left.
    state          text        NOT NULL,
    previous_state text,
    at             timestamptz NOT NULL
);
CREATE INDEX reminder_changes_tenant_position_idx ON reminder_changes (tenant, xact, event_id);
CREATE INDEX reminder_changes_position_idx ON reminder_changes (xact, event_id);

-- A time as the status events write it: RFC 3339 in UTC.
-- +goose StatementBegin
CREATE FUNCTION status_event_time(t timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION reminder_events_status() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r       record;
    st      text;
    v_state text;
    v_prev  text;
    n       integer;
BEGIN
    SELECT id, tenant, shipment_id, update_id, subscriber_id, channel, state, due_at INTO r
      FROM reminders WHERE id = NEW.reminder_id;
    st := reminder_status_event(NEW.type, NEW.detail, r.state);
    IF st IS NULL THEN
        RETURN NULL;
    END IF;
    -- The state the event records (a send and its delivery written in
    -- one statement are two events, each with its own), or the one the
    -- reminder is in for a note.
    v_state := coalesce(reminder_event_into(NEW.type, NEW.detail), r.state);
    INSERT INTO reminder_changes AS c (reminder_id, tenant, seq, xact, event_id, type, state, at)
    VALUES (r.id, r.tenant, 1, pg_current_xact_id(), NEW.id, st, v_state, NEW.at)
    ON CONFLICT (reminder_id) DO UPDATE
       SET seq = c.seq + 1, xact = excluded.xact, event_id = excluded.event_id, type = excluded.type,
           previous_state = c.state, state = excluded.state, at = excluded.at
    RETURNING c.seq, c.previous_state INTO n, v_prev;
    INSERT INTO status_outbox (endpoint, reminder_id, seq, event_id, type, payload)
    SELECT e.name, r.id, n, 'evt_' || NEW.id, st,
           jsonb_build_object(
               'id', 'evt_' || NEW.id,
               'type', 'reminder.' || st,
               'timestamp', status_event_time(NEW.at),
               'data', jsonb_strip_nulls(jsonb_build_object(
                   'reminder_id', r.id, 'tenant', nullif(r.tenant, ''), 'shipment_id', r.shipment_id,
                   'update_id', r.update_id, 'subscriber_id', r.subscriber_id, 'channel', r.channel,
                   'state', v_state, 'previous_state', v_prev, 'sequence', n, 'due_at', status_event_time(r.due_at),
                   'notice_sent', CASE WHEN st = 'cancelled' THEN NEW.type = 'cancellation_sent' END,
                   'reason', CASE WHEN st = 'escalated' THEN reminder_event_text(NEW.detail, 'reason') END)))
      FROM status_endpoints e
     WHERE e.tenant = r.tenant AND e.retired_at IS NULL AND e.disabled_at IS NULL AND st = ANY (e.events);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER reminder_events_status AFTER INSERT ON reminder_events
    FOR EACH ROW EXECUTE FUNCTION reminder_events_status();

-- +goose StatementBegin
DO $$
BEGIN
    -- The definer's names resolve in this schema only, pg_temp last.
    EXECUTE format('ALTER FUNCTION reminder_events_status() SET search_path = %I, pg_temp', current_schema());
    REVOKE ALL ON FUNCTION reminder_events_status() FROM PUBLIC;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        -- serve registers its endpoints, the relay and `outbox retry` move
        -- rows and endpoints; no row is inserted but by the trigger, and
        -- none says anything but what the trigger wrote.
        GRANT SELECT, INSERT, UPDATE ON status_endpoints TO shipnotify_runtime;
        GRANT SELECT ON status_outbox, reminder_changes TO shipnotify_runtime;
        GRANT UPDATE (status, attempts, next_attempt_at, claimed_by, lease_until, last_status, last_error, finished_at)
            ON status_outbox TO shipnotify_runtime;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_pruner') THEN
        GRANT SELECT, DELETE ON status_outbox TO shipnotify_pruner;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
SET LOCAL lock_timeout = '5s';
DROP TRIGGER reminder_events_status ON reminder_events;
DROP FUNCTION reminder_events_status();
DROP FUNCTION status_event_time(timestamptz);
DROP TABLE reminder_changes;
DROP TABLE status_outbox;
DROP TABLE status_endpoints;
DROP FUNCTION reminder_status_event(text, jsonb, text);

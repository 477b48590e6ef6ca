-- The mirror at tens of millions of rows, and a way to let old rows go.
--
-- Retention: `shipnotify prune` deletes finished reminders with their events
-- and deliveries. The audit trail stays append-only for everything else: its
-- trigger lets a DELETE through only inside a transaction that set
-- shipnotify.prune = 'on' (SET LOCAL), and then only for events at least
-- 4 days old of reminders that are finished (sent, failed, cancelled,
-- expired) and unchanged for 4 days. 4 days is the notify activity's retry
-- budget (72 h, which bounds a compensation or escalation still running on a
-- finished reminder) plus a day. UPDATE and TRUNCATE still always fail.
-- Prune runs as a member of shipnotify_pruner (or the owner), which may
-- read and delete, and lock prune's candidates through a function; the
-- runtime role still cannot delete anything.
--
-- Scale: list's due window reads a covering index; list --state pending and
-- reconcile --verify page through pending reminders by two partial indexes.
-- The gauges counted reminders by state
-- with a scan of the whole table (3.4 s at ten million rows, past their 5 s
-- timeout long before a year of the seed's customer). Statement triggers
-- keep the counts in reminder_tallies instead, in the same transaction as
-- the change, spread over 16 slots per state so concurrent writers seldom
-- wait on one row.
--
-- On a large mirror this migration holds writers back while it builds three
-- indexes and counts the table once (45 s at ten million rows, here):
-- the workers' mirror writes are retried, so deliveries wait, none is lost.

-- +goose Up
-- The pending reminders, a few percent of a year's mirror, in the two
-- orders that page through them: `list --state pending` and export (due
-- time, then id) and reconcile --verify's PendingBefore (id). Without them
-- both read past millions of finished rows for one page (14 s and 2 s at
-- ten million rows).
CREATE INDEX reminders_pending_due_at_idx ON reminders (due_at, id) WHERE state IN ('scheduled', 'awaiting_approval');
CREATE INDEX reminders_pending_id_idx ON reminders (id) WHERE state IN ('scheduled', 'awaiting_approval');

-- "What do we owe next Tuesday?" lists an hour's reminders, a thousand
-- rows, in (due_at, id) order. Their rows were written over the week
-- before, so through an index on due_at alone each costs a heap page of
-- its own (600 pages an hour at ten million rows: p99 60-145 ms here).
-- This index holds every column List returns, so a vacuumed page range is
-- read from the index alone (p99 11-13 ms at the server), and its key
-- (due_at, id) is List's order and keyset, no sort. It replaces the index
-- on due_at, at about the heap's size again.
CREATE INDEX reminders_due_at_list_idx ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at);
DROP INDEX reminders_due_at_idx;
-- Index-only scans need pages marked all-visible, which only vacuum does:
-- by default a large table is vacuumed after 20% of it is new (months of
-- reminders here), so the coming weeks' pages, the ones people list,
-- would never be. These run it about every day at the seed's rate.
ALTER TABLE reminders SET (autovacuum_vacuum_insert_scale_factor = 0.002, autovacuum_vacuum_scale_factor = 0.01);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Prune's path; reminder_events_prunable checks what it deletes.
    IF TG_OP = 'DELETE' AND current_setting('shipnotify.prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'reminder_events is append-only';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION reminder_events_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER reminder_events_prune_only
    AFTER DELETE ON reminder_events REFERENCING OLD TABLE AS pruned
    FOR EACH STATEMENT EXECUTE FUNCTION reminder_events_prunable();

-- Prune takes its candidates through this function, which locks them FOR
-- UPDATE SKIP LOCKED: a row another transaction holds is passed over, never
-- waited for. Locking needs UPDATE on the table, which shipnotify_pruner
-- does not have; the function, running as the owner, locks only these rows.
-- +goose StatementBegin
CREATE FUNCTION reminders_prune_candidates(age_secs float8, after_due timestamptz, after_id text, n int)
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
REVOKE ALL ON FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) FROM PUBLIC;

-- Reminders by state: the sum of a state's slots.
CREATE TABLE reminder_tallies (
    state text   NOT NULL,
    slot  int    NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (state, slot)
);

-- +goose StatementBegin
CREATE FUNCTION reminders_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A writer's slot is its backend's; states in order, so two writers
    -- lock the rows they share in the same order.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO reminder_tallies AS t (state, slot, n)
        SELECT state, pg_backend_pid() % 16, count(*) FROM tally_new GROUP BY state ORDER BY state
        ON CONFLICT (state, slot) DO UPDATE SET n = t.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO reminder_tallies AS t (state, slot, n)
        SELECT state, pg_backend_pid() % 16, -count(*) FROM tally_old GROUP BY state ORDER BY state
        ON CONFLICT (state, slot) DO UPDATE SET n = t.n + excluded.n;
    ELSE
        INSERT INTO reminder_tallies AS t (state, slot, n)
        SELECT state, pg_backend_pid() % 16, sum(d)
          FROM (SELECT state, 1 AS d FROM tally_new UNION ALL SELECT state, -1 FROM tally_old) c
         GROUP BY state HAVING sum(d) <> 0 ORDER BY state
        ON CONFLICT (state, slot) DO UPDATE SET n = t.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER reminders_tally_insert
    AFTER INSERT ON reminders REFERENCING NEW TABLE AS tally_new
    FOR EACH STATEMENT EXECUTE FUNCTION reminders_tally();
CREATE TRIGGER reminders_tally_update
    AFTER UPDATE ON reminders REFERENCING OLD TABLE AS tally_old NEW TABLE AS tally_new
    FOR EACH STATEMENT EXECUTE FUNCTION reminders_tally();
CREATE TRIGGER reminders_tally_delete
    AFTER DELETE ON reminders REFERENCING OLD TABLE AS tally_old
    FOR EACH STATEMENT EXECUTE FUNCTION reminders_tally();
-- The rows already there, counted once. The triggers above hold a lock that
-- keeps writers out until this migration commits, so none is missed or
-- counted twice (on a large mirror, writes wait for this one count).
INSERT INTO reminder_tallies (state, slot, n) SELECT state, 0, count(*) FROM reminders GROUP BY state;

-- +goose StatementBegin
DO $$
BEGIN
    -- A definer's function resolves names in this schema only.
    EXECUTE format('ALTER FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) SET search_path = %I, pg_temp',
                   current_schema());
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        GRANT SELECT, INSERT, UPDATE ON reminder_tallies TO shipnotify_runtime;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_pruner') THEN
        BEGIN
            CREATE ROLE shipnotify_pruner NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL; -- created concurrently
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role shipnotify_pruner does not exist and cannot be created here; prune runs as the owner';
                RETURN;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO shipnotify_pruner', current_schema());
    GRANT SELECT, DELETE ON updates, reminders, reminder_events, deliveries TO shipnotify_pruner;
    GRANT SELECT ON disabled_endpoints, goose_db_version TO shipnotify_pruner;
    -- Its deletes move the tallies.
    GRANT SELECT, INSERT, UPDATE ON reminder_tallies TO shipnotify_pruner;
    GRANT EXECUTE ON FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) TO shipnotify_pruner;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_pruner') THEN
        REVOKE ALL ON updates, reminders, reminder_events, deliveries, disabled_endpoints, goose_db_version, reminder_tallies
            FROM shipnotify_pruner;
        REVOKE ALL ON FUNCTION reminders_prune_candidates(float8, timestamptz, text, int) FROM shipnotify_pruner;
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM shipnotify_pruner', current_schema());
    END IF;
END
$$;
-- +goose StatementEnd
DROP TRIGGER reminders_tally_delete ON reminders;
DROP TRIGGER reminders_tally_update ON reminders;
DROP TRIGGER reminders_tally_insert ON reminders;
DROP FUNCTION reminders_tally();
DROP FUNCTION reminders_prune_candidates(float8, timestamptz, text, int);
DROP TABLE reminder_tallies;
DROP TRIGGER reminder_events_prune_only ON reminder_events;
DROP INDEX reminders_pending_id_idx;
DROP INDEX reminders_pending_due_at_idx;
ALTER TABLE reminders RESET (autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_scale_factor);
CREATE INDEX reminders_due_at_idx ON reminders (due_at);
DROP INDEX reminders_due_at_list_idx;
DROP FUNCTION reminder_events_prunable();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'reminder_events is append-only';
END
$$;
-- +goose StatementEnd

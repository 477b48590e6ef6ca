-- The trail is dated when it is written, not when its transaction began.
--
-- 00013 and 00019 date a non-owner's event and a reminder's last change
-- with now(), which is the transaction's start: a runtime role that held
-- a transaction open for 20 s wrote an event at 14:09:39 dated 14:09:19,
-- and nothing bounded the gap (prune counts a reminder's age from these
-- dates). clock_timestamp() is the moment the row is written, so the date
-- is at most the time between that row and the commit away from when the
-- row became visible. That remainder is bounded where the product opens
-- its connections (idle_in_transaction_session_timeout, and
-- transaction_timeout on PostgreSQL 17 and later; see budget.go): a role
-- setting would not do it, since ALTER ROLE shipnotify_runtime SET applies
-- to sessions that log in as shipnotify_runtime, which is NOLOGIN, never to
-- its members.
--
-- The owner (migrate, an operator's hand repair) is trusted and dates as
-- it likes, as before. CREATE OR REPLACE resets a function's settings, so
-- both functions are pinned to this schema again, pg_temp last (00019).

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT caller_owns(TG_RELID) THEN
        NEW.at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- 00019's, with the clock's time.
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
        NEW.created_at := clock_timestamp();
        NEW.updated_at := NEW.created_at;
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
        NEW.updated_at := clock_timestamp();
    END IF;
    NEW.created_at := OLD.created_at;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['reminders_guard()', 'reminder_events_time()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION reminder_events_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT caller_owns(TG_RELID) THEN
        NEW.at := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
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
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['reminders_guard()', 'reminder_events_time()'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

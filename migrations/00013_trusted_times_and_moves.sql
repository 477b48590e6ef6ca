-- The database, not the caller, keeps the audit trail's times and a
-- reminder's state machine. A role that does not own the tables (the
-- runtime role the product runs as) cannot backdate an event or a
-- reminder's last change (which prune's age is counted from), and cannot
-- move a reminder in a way its state machine (reminder/states.go, whose
-- SQL twin reminder_move_allowed is tested against it) does not allow:
-- reopen a cancelled reminder, or unsend a sent one. The owner (migrate,
-- and an operator's hand repair) is trusted.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION reminder_move_allowed(from_state text, to_state text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
SELECT (from_state IN ('scheduled', 'awaiting_approval')
        AND to_state IN ('sent', 'delivered', 'undeliverable', 'failed', 'cancelled', 'expired'))
    OR (from_state = 'awaiting_approval' AND to_state = 'scheduled')
    OR (from_state = 'sent' AND to_state IN ('delivered', 'undeliverable'))
    OR (from_state = 'delivered' AND to_state = 'undeliverable')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION caller_owns(rel oid) RETURNS boolean LANGUAGE sql STABLE AS $$
SELECT pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = rel), 'USAGE')
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION reminders_guard() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER reminders_guard BEFORE INSERT OR UPDATE ON reminders
    FOR EACH ROW EXECUTE FUNCTION reminders_guard();

-- +goose StatementBegin
CREATE FUNCTION reminder_events_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT caller_owns(TG_RELID) THEN
        NEW.at := now();
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER reminder_events_time BEFORE INSERT ON reminder_events
    FOR EACH ROW EXECUTE FUNCTION reminder_events_time();

-- +goose Down
DROP TRIGGER reminder_events_time ON reminder_events;
DROP FUNCTION reminder_events_time();
DROP TRIGGER reminders_guard ON reminders;
DROP FUNCTION reminders_guard();
DROP FUNCTION caller_owns(oid);
DROP FUNCTION reminder_move_allowed(text, text);

-- Two roles for the mirror. The owner (whoever runs `shipnotify migrate`)
-- owns the tables; the workers, the starter and the CLI run as a member of
-- shipnotify_runtime, which has only the DML they use. Not being the owner,
-- it cannot disable the append-only trigger on reminder_events, nor truncate
-- or delete from any table. Every later migration that adds a table grants it
-- here too.
--
-- The role is created when the migrating role may create roles; otherwise
-- (a single-role setup) the grants are skipped with a notice.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        BEGIN
            CREATE ROLE shipnotify_runtime NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL; -- created concurrently
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'role shipnotify_runtime does not exist and cannot be created here; no grants made';
                RETURN;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO shipnotify_runtime', current_schema());
    GRANT SELECT, INSERT, UPDATE ON updates, reminders, deliveries, disabled_endpoints TO shipnotify_runtime;
    GRANT SELECT, INSERT ON reminder_events TO shipnotify_runtime;
    -- Workers refuse to start on a schema with migrations pending.
    GRANT SELECT ON goose_db_version TO shipnotify_runtime;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        REVOKE ALL ON updates, reminders, deliveries, disabled_endpoints, reminder_events, goose_db_version
            FROM shipnotify_runtime;
        EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM shipnotify_runtime', current_schema());
    END IF;
END
$$;
-- +goose StatementEnd

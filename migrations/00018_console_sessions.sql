-- The approval console's sessions, one row a login, so that a logout ends
-- its session on every serve replica and across restarts: a cookie whose
-- row is gone logs no one in, however well it is signed. The cookie
-- carries a random session id under serve's MAC (SHIPNOTIFY_SESSION_KEY);
-- the row keeps only the id's SHA-256, so whoever reads the table cannot
-- make a cookie from it, and whoever writes it (the worker's role too)
-- cannot make a session without serve's key. serve deletes a session's
-- row at logout and the expired rows at every login, so the runtime role
-- may delete here; it still deletes nothing of the audit trail's.

-- +goose Up
CREATE TABLE console_sessions (
    id_hash    bytea       PRIMARY KEY CHECK (length(id_hash) = 32),
    approver   text        NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_sessions_expires_at_idx ON console_sessions (expires_at);

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        GRANT SELECT, INSERT, DELETE ON console_sessions TO shipnotify_runtime;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE console_sessions;

-- Webhook endpoints that answered 410 Gone: nothing more is sent to them.
-- Keyed by a hash of the URL, so the table holds no address.

-- +goose Up
CREATE TABLE disabled_endpoints (
    url_sha256  text        PRIMARY KEY,
    reminder_id text        NOT NULL REFERENCES reminders (id),
    reason      text        NOT NULL,
    disabled_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE disabled_endpoints;

-- A channel beyond email and webhook keeps its subscriber's address in a
-- column of its own: address (a phone number, a pager's id). Email and
-- webhook keep theirs (email; webhook_url and webhook_secret). A new
-- channel's own migration adds its name to reminders_channel_check; the
-- rule below already takes it.
--
-- On a large mirror nothing here reads the whole table while writers wait:
-- the new rule is added NOT VALID (new and changed rows are checked at
-- once) and 00012 validates it without holding writers back.

-- +goose Up
ALTER TABLE reminders ADD COLUMN address text;
ALTER TABLE reminders ADD CONSTRAINT reminders_address_check
    CHECK ((channel = 'email' AND email IS NOT NULL AND webhook_url IS NULL AND address IS NULL)
        OR (channel = 'webhook' AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL
            AND email IS NULL AND address IS NULL)
        OR (channel NOT IN ('email', 'webhook') AND address IS NOT NULL
            AND email IS NULL AND webhook_url IS NULL AND webhook_secret IS NULL))
    NOT VALID;
ALTER TABLE reminders DROP CONSTRAINT reminders_check;

-- +goose Down
ALTER TABLE reminders DROP CONSTRAINT reminders_address_check;
ALTER TABLE reminders ADD CONSTRAINT reminders_check
    CHECK ((channel = 'email' AND email IS NOT NULL AND webhook_url IS NULL)
        OR (channel = 'webhook' AND webhook_url IS NOT NULL AND webhook_secret IS NOT NULL AND email IS NULL))
    NOT VALID;
ALTER TABLE reminders DROP COLUMN address;

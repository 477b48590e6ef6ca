-- How an email looks: an update may name a SendGrid dynamic template and
-- the caller's part of its data; a subscriber may carry a name, an IANA
-- time zone and a BCP 47 locale. The notify activity reads them at send
-- time (mirror/deliveries.go ClaimDelivery), so none of it travels in a
-- workflow's input or history.
--
-- Template data is personal data, kept here as the message text is. The
-- rules below repeat reminder.Update.Plan's shapes as a last line: the
-- columns are new and NULL in every row of before, so the rules are added
-- NOT VALID (nothing reads the table while writers wait) and hold for
-- every row written from now on.

-- +goose Up
ALTER TABLE updates
    ADD COLUMN template_id text,
    ADD COLUMN template_data jsonb;
ALTER TABLE updates ADD CONSTRAINT updates_template_check
    CHECK ((template_id IS NULL AND template_data IS NULL)
        OR (template_id ~ '^d-[0-9a-f]{32}$'
            AND (template_data IS NULL OR jsonb_typeof(template_data) = 'object')))
    NOT VALID;
ALTER TABLE reminders
    ADD COLUMN subscriber_name text,
    ADD COLUMN time_zone text,
    ADD COLUMN locale text;
ALTER TABLE reminders ADD CONSTRAINT reminders_presentation_check
    CHECK ((subscriber_name IS NULL OR char_length(subscriber_name) BETWEEN 1 AND 100)
       AND (time_zone IS NULL OR char_length(time_zone) BETWEEN 1 AND 64)
       AND (locale IS NULL OR char_length(locale) BETWEEN 1 AND 35))
    NOT VALID;

-- +goose Down
ALTER TABLE reminders DROP CONSTRAINT reminders_presentation_check;
ALTER TABLE reminders DROP COLUMN subscriber_name, DROP COLUMN time_zone, DROP COLUMN locale;
ALTER TABLE updates DROP CONSTRAINT updates_template_check;
ALTER TABLE updates DROP COLUMN template_id, DROP COLUMN template_data;

-- What the tracker first asked for, kept apart from what the reminder has
-- become: a resubmission is compared with it (identical, or refused as
-- changed), and moving an update's window recomputes every due time from it,
-- so moving twice to the same window shifts once. And a cancel that was asked
-- for but not yet finished by the workflow is visible in the mirror.

-- +goose Up
ALTER TABLE updates ADD COLUMN requested_window_start timestamptz;
UPDATE updates SET requested_window_start = window_start;

ALTER TABLE reminders
    ADD COLUMN requested_due_at    timestamptz,
    ADD COLUMN cancel_requested_at timestamptz;
UPDATE reminders SET requested_due_at = due_at;
ALTER TABLE reminders ALTER COLUMN requested_due_at SET NOT NULL;

-- +goose Down
ALTER TABLE reminders DROP COLUMN cancel_requested_at, DROP COLUMN requested_due_at;
ALTER TABLE updates DROP COLUMN requested_window_start;

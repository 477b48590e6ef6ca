-- Approval and escalation: who hears of trouble, and the approval policy a
-- reminder was scheduled with (kept so a reconciler can restart it as it was).

-- +goose Up
ALTER TABLE updates ADD COLUMN escalation_email text;
ALTER TABLE reminders
    ADD COLUMN approval_timeout      interval,
    ADD COLUMN approval_expire_after interval,
    ADD CONSTRAINT reminders_approval_check
        CHECK ((approval_timeout IS NULL) = (approval_expire_after IS NULL));

-- +goose Down
ALTER TABLE reminders
    DROP CONSTRAINT reminders_approval_check,
    DROP COLUMN approval_expire_after,
    DROP COLUMN approval_timeout;
ALTER TABLE updates DROP COLUMN escalation_email;

-- +goose NO TRANSACTION

-- Send windows (issue 39): a reminder keeps the window it goes out in,
-- resolved when it was scheduled (days, hours, zone, dates skipped,
-- policy), and the time it goes out at its current due time. The due time
-- and the delivery key stay the reminder's own; goes_out_at moves with the
-- due time (every write of due_at writes it), and is NULL for a reminder
-- with no window, which goes out when it is due: coalesce(goes_out_at,
-- due_at) is when any reminder goes out. Nullable, so adding them writes
-- no row, and rows written by a release before this one read right.
--
-- "What do we owe next Tuesday?" counts by when reminders go out, and the
-- oldest-overdue gauge asks which pending reminder should have gone out
-- longest ago (a reminder waiting for its window is not late): the index
-- is on that, for the pending reminders. It is built
-- CONCURRENTLY (writers go on), so this file runs outside a transaction;
-- a failed build is dropped and built again on the next run (00008).
-- List returns both columns, so the covering index its due window reads
-- is rebuilt with them (as 00008 and 00015 did), or each row of an hour's
-- listing would cost a heap page again.

-- +goose Up
ALTER TABLE reminders ADD COLUMN IF NOT EXISTS send_window jsonb, ADD COLUMN IF NOT EXISTS goes_out_at timestamptz;
DROP INDEX CONCURRENTLY IF EXISTS reminders_pending_goes_out_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_pending_goes_out_idx ON reminders ((coalesce(goes_out_at, due_at)))
    WHERE state IN ('scheduled', 'awaiting_approval');
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at, tenant, goes_out_at, send_window);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at, tenant);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;
DROP INDEX CONCURRENTLY IF EXISTS reminders_pending_goes_out_idx;
ALTER TABLE reminders DROP COLUMN IF EXISTS goes_out_at, DROP COLUMN IF EXISTS send_window;

-- +goose NO TRANSACTION

-- List returns the provider outcome columns of 00007 now, so the covering
-- index its due window reads (00006) includes them too: without them each
-- row of an hour's listing costs a heap page again.
--
-- The index is rebuilt CONCURRENTLY, so writers go on while it builds
-- (00006's plain build held them back for 45 s at ten million rows). That
-- cannot run inside a transaction, so this file has none: a failure leaves
-- it part way, and running it again finishes it.
--   * A concurrent build that failed leaves an INVALID index under the new
--     name, which IF NOT EXISTS would take for done. So the leftover is
--     dropped first, invalid or not: only a DO block could ask which, and
--     CONCURRENTLY cannot run in one. A valid leftover (a run stopped
--     before the rename) is rebuilt, which is slower, never wrong.
--   * IF EXISTS skips the steps a previous run already took.
-- From the drop of the old index to the rename, List reads the new one
-- under its new name: the planner goes by the columns, not the name.
--
-- It also finishes 00007 the same way: it validates 00007's CHECK
-- constraints (a read of the table that lets writers go on) and builds the
-- unconfirmed gauge's partial index concurrently (dropped first, like the
-- list index, in case a failed build left it invalid).

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_state_check;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_provider_outcome_check;
DROP INDEX CONCURRENTLY IF EXISTS reminders_awaiting_outcome_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_awaiting_outcome_idx ON reminders (awaiting_outcome_since)
    WHERE awaiting_outcome_since IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reminders_awaiting_outcome_idx;
-- 00006's index, rebuilt the same way.
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;

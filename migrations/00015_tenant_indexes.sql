-- +goose NO TRANSACTION

-- The indexes 00016 turns into the tenant-qualified keys, and the list's
-- covering index (00008) with the tenant column, which List now returns
-- and filters on: without it each listed row costs a heap page again.
-- Built CONCURRENTLY, so writers go on; as in 00008, a leftover of a
-- failed run is dropped first (it may be INVALID) and IF EXISTS skips what
-- a previous run finished.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS updates_tenant_key_next;
CREATE UNIQUE INDEX CONCURRENTLY updates_tenant_key_next ON updates (tenant, shipment_id, update_id);
DROP INDEX CONCURRENTLY IF EXISTS reminders_tenant_key_next;
CREATE UNIQUE INDEX CONCURRENTLY reminders_tenant_key_next
    ON reminders (tenant, shipment_id, update_id, subscriber_id);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at, tenant);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;
DROP INDEX CONCURRENTLY IF EXISTS reminders_tenant_key_next;
DROP INDEX CONCURRENTLY IF EXISTS updates_tenant_key_next;

-- +goose NO TRANSACTION

-- Digests (issue 39): reminders to one address of one tenant and channel
-- that go out at the same boundary of a digest interval go out as one
-- message. A reminder keeps its interval (digest_every, NULL: alone); its
-- goes_out_at is the boundary. The first member whose send runs claims
-- every member's own delivery key in one statement (deliveries.digest_of:
-- the reminder whose attempt holds the claim), and seals the digest just
-- before the call: the members still sendable get the digest's key
-- (deliveries.digest_key, reminders.digest_key), the rest are released. A
-- provider's event for the digest's key is applied to every member's own
-- key. Nullable columns: adding them writes no row, and rows of a release
-- before this one read as reminders that go out alone.
--
-- The members of a digest are found by the partial index on the pending
-- reminders with a digest, by address and goes-out time; the index on
-- deliveries.digest_key maps a provider's event to the members, and the one
-- on reminders.digest_key lists a digest's members. They are
-- built CONCURRENTLY (writers go on), so this file runs outside a
-- transaction. List returns both reminders columns, so the covering index
-- its due window reads is rebuilt with them (as 00025 did).

-- +goose Up
ALTER TABLE reminders ADD COLUMN IF NOT EXISTS digest_every interval, ADD COLUMN IF NOT EXISTS digest_key text;
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS digest_of text, ADD COLUMN IF NOT EXISTS digest_key text;
DROP INDEX CONCURRENTLY IF EXISTS reminders_digest_members_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_digest_members_idx
    ON reminders (tenant, channel, (coalesce(email, webhook_url)), (coalesce(goes_out_at, due_at)))
    WHERE digest_every IS NOT NULL AND state IN ('scheduled', 'awaiting_approval');
DROP INDEX CONCURRENTLY IF EXISTS deliveries_digest_key_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_digest_key_idx ON deliveries (digest_key) WHERE digest_key IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS reminders_digest_key_idx;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_digest_key_idx ON reminders (digest_key) WHERE digest_key IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at, tenant, goes_out_at, send_window,
             digest_every, digest_key);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS reminders_digest_key_idx;
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx_next;
CREATE INDEX CONCURRENTLY IF NOT EXISTS reminders_due_at_list_idx_next ON reminders (due_at, id)
    INCLUDE (shipment_id, update_id, subscriber_id, channel, requested_due_at, state, delivery_key,
             workflow_id, workflow_started_at, sent_at, cancel_requested_at, created_at, updated_at,
             provider_outcome, provider_outcome_at, delivered_at, tenant, goes_out_at, send_window);
DROP INDEX CONCURRENTLY IF EXISTS reminders_due_at_list_idx;
ALTER INDEX reminders_due_at_list_idx_next RENAME TO reminders_due_at_list_idx;
DROP INDEX CONCURRENTLY IF EXISTS deliveries_digest_key_idx;
DROP INDEX CONCURRENTLY IF EXISTS reminders_digest_members_idx;
ALTER TABLE deliveries DROP COLUMN IF EXISTS digest_key, DROP COLUMN IF EXISTS digest_of;
ALTER TABLE reminders DROP COLUMN IF EXISTS digest_key, DROP COLUMN IF EXISTS digest_every;

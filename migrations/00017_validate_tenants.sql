-- Validates 00014's rules and 00016's foreign key: a read of the tables
-- that lets writers go on (SHARE UPDATE EXCLUSIVE), in a transaction of
-- its own after the keys' swap committed.

-- +goose Up
ALTER TABLE updates VALIDATE CONSTRAINT updates_tenant_check;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_tenant_check;
ALTER TABLE reminders VALIDATE CONSTRAINT reminders_tenant_shipment_id_update_id_fkey;

-- +goose Down
SELECT 1;

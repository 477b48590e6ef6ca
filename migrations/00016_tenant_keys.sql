-- The keys become tenant-qualified, on the indexes 00015 built: each swap
-- is a catalog change under a brief lock, not a build. The foreign key is
-- added NOT VALID (new rows are checked at once) and 00017 validates it
-- without holding writers back.

-- +goose Up
ALTER TABLE reminders DROP CONSTRAINT reminders_shipment_id_update_id_fkey;
ALTER TABLE updates DROP CONSTRAINT updates_pkey;
ALTER TABLE updates ADD CONSTRAINT updates_pkey PRIMARY KEY USING INDEX updates_tenant_key_next;
ALTER TABLE reminders DROP CONSTRAINT reminders_shipment_id_update_id_subscriber_id_key;
ALTER TABLE reminders ADD CONSTRAINT reminders_tenant_shipment_id_update_id_subscriber_id_key
    UNIQUE USING INDEX reminders_tenant_key_next;
ALTER TABLE reminders ADD CONSTRAINT reminders_tenant_shipment_id_update_id_fkey
    FOREIGN KEY (tenant, shipment_id, update_id) REFERENCES updates (tenant, shipment_id, update_id) NOT VALID;

-- +goose Down
-- Only while one tenant holds every id: another tenant's rows would break
-- the old keys, and this fails rather than lose them.
ALTER TABLE reminders DROP CONSTRAINT reminders_tenant_shipment_id_update_id_fkey;
ALTER TABLE reminders DROP CONSTRAINT reminders_tenant_shipment_id_update_id_subscriber_id_key;
ALTER TABLE reminders ADD CONSTRAINT reminders_shipment_id_update_id_subscriber_id_key
    UNIQUE (shipment_id, update_id, subscriber_id);
ALTER TABLE updates DROP CONSTRAINT updates_pkey;
ALTER TABLE updates ADD CONSTRAINT updates_pkey PRIMARY KEY (shipment_id, update_id);
ALTER TABLE reminders ADD CONSTRAINT reminders_shipment_id_update_id_fkey
    FOREIGN KEY (shipment_id, update_id) REFERENCES updates (shipment_id, update_id);

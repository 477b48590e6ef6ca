-- Tenants: an update belongs to the tenant (API key, approver) that
-- scheduled it, and ids are per tenant, so two trackers may both use
-- shipment SHP-1's update u1. Every row written before this belongs to the
-- default tenant, stored as '' (its name is configuration, so renaming it
-- moves no row, and its ids keep their form: reminder.ID).
--
-- On a large mirror nothing here holds writers back while it reads the
-- table: the columns' constant default is metadata only, and the rules on
-- their values are added NOT VALID (00017 validates them). 00015 builds
-- the keys' indexes concurrently and 00016 makes them the keys.

-- +goose Up
ALTER TABLE updates ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE reminders ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE updates ADD CONSTRAINT updates_tenant_check
    CHECK (tenant = '' OR tenant ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$') NOT VALID;
ALTER TABLE reminders ADD CONSTRAINT reminders_tenant_check
    CHECK (tenant = '' OR tenant ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$') NOT VALID;

-- +goose Down
ALTER TABLE reminders DROP COLUMN tenant;
ALTER TABLE updates DROP COLUMN tenant;

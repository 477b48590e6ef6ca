-- An ambiguous send is a send.
--
-- A provider call that timed out, was cut or died after its request may
-- have reached the provider keeps its claim: the attempt marks the key
-- 'maybe_sent' (when, and why) instead of releasing it, and nothing sends
-- it again until the provider's own evidence settles it or a bounded wait
-- passes (mirror.ClaimDelivery). A claim whose attempt knows nothing left
-- (DNS failure, connection refused, or any answer from the provider) is
-- 'released', so the next attempt takes it over at once; a 'sending' claim
-- whose lease lapsed with no word from its holder (the worker died mid-call)
-- is a maybe-sent too.
--
--   sending ──answer 2xx──▶ sent
--      │  └──answer 4xx (for good)──▶ failed
--      ├──answer 429/5xx, refused, DNS──▶ released ──claim──▶ sending
--      └──timeout/reset after the request left, lease lapsed──▶ maybe_sent
--                 maybe_sent ──provider event for the key──▶ sent (nothing sent again)
--                 maybe_sent ──no event within the wait──▶ sending (sent again, same key)
--
-- Two shared records make the provider's behaviour, not each reminder's,
-- pace the sends:
--   provider_health: when a provider (the mail API, one webhook host) began
--     failing and last failed, so a retry's backoff follows the outage and
--     the backlog goes soon after it ends;
--   send_rate: the next free slot of the provider's rate cap, so the cap
--     holds across every worker and every path, whatever the task queue's
--     own limit lets through.
--
-- The CHECK is added NOT VALID (new and changed rows are checked at once);
-- 00010 validates it without holding writers back.

-- +goose Up
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('sending', 'released', 'maybe_sent', 'sent', 'failed')) NOT VALID;
ALTER TABLE deliveries
    -- When the attempt found its outcome unknown (or the lapsed lease it
    -- left), and what it knew; kept after a resend, so the record says the
    -- key may have gone out twice.
    ADD COLUMN maybe_sent_at     timestamptz,
    ADD COLUMN maybe_sent_reason text;

CREATE TABLE provider_health (
    -- 'email' (the mail API) or 'webhook:' and a hash of the receiver's host.
    provider        text        PRIMARY KEY,
    -- The first failure of the current run of failures: a failure more than
    -- a gap after the last one starts a new run.
    failing_since   timestamptz NOT NULL,
    last_failure_at timestamptz NOT NULL,
    failures        bigint      NOT NULL DEFAULT 1,
    -- An answer after the last failure ends the run; written only by a
    -- worker that saw a failure, so a healthy provider costs nothing here.
    last_success_at timestamptz
);

CREATE TABLE send_rate (
    name    text        PRIMARY KEY,
    -- The theoretical arrival time of the next send (GCRA): a send may take
    -- the slot at max(next_at, now()) when that is near enough.
    next_at timestamptz NOT NULL
);

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        GRANT SELECT, INSERT, UPDATE ON provider_health, send_rate TO shipnotify_runtime;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shipnotify_runtime') THEN
        REVOKE ALL ON provider_health, send_rate FROM shipnotify_runtime;
    END IF;
END
$$;
-- +goose StatementEnd
DROP TABLE send_rate;
DROP TABLE provider_health;
-- Down fails while a delivery is released or maybe sent: their rows would
-- lose what happened to them.
ALTER TABLE deliveries DROP COLUMN maybe_sent_reason, DROP COLUMN maybe_sent_at;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('sending', 'sent', 'failed'));

-- Idempotency-Key claims carry a lease the instance running the request renews while it runs.
-- A claim whose lease ran out belongs to an instance that stopped mid-request (killed, crashed):
-- it is closed with no response, and repeats are told the request was interrupted, so a
-- request is never executed twice. Claims made before this migration have no lease; they
-- count as leased for 10 minutes from their creation.
ALTER TABLE idempotency_keys ADD COLUMN lease_until BIGINT;

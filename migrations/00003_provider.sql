-- +goose Up
-- The simulated payment provider's own books. It lives in the same database
-- for convenience, but no refundd table references it and only payments.Sim
-- reads or writes it: a real provider keeps its ledger out of our reach.
-- A row exists only once a refund has committed; a refund in flight is
-- represented by a transaction-scoped advisory lock on its key, so a crashed
-- provider never leaves a key stuck "in flight".
CREATE TABLE provider_refunds (
    key            TEXT PRIMARY KEY CHECK (key <> ''),
    ref            TEXT NOT NULL UNIQUE,
    order_ref      TEXT NOT NULL CHECK (order_ref <> ''),
    amount         BIGINT NOT NULL CHECK (amount > 0),
    currency       TEXT NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status         TEXT NOT NULL CHECK (status IN ('succeeded', 'failed')),
    failure_reason TEXT NOT NULL DEFAULT '',
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX provider_refunds_created_idx ON provider_refunds (created_at, key);

-- +goose Down
DROP TABLE provider_refunds;

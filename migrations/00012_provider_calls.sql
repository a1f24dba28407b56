-- +goose Up
-- Every call made to the payment provider about an operation: submits and
-- lookups, answered or not. A row is written before the call, so a worker
-- that dies mid-call leaves one with no answer; the answer (its HTTP status,
-- or none when no answer was read) and the call's duration are filled in
-- after it. Support reads the ledger's whole story from here.
CREATE TABLE provider_calls (
    id           BIGSERIAL PRIMARY KEY,
    operation_id UUID NOT NULL REFERENCES operations (id),
    kind         TEXT NOT NULL CHECK (kind IN ('submit', 'lookup')),
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    answered     BOOLEAN NOT NULL DEFAULT false,
    http_status  INT,
    duration_us  BIGINT,
    result       TEXT NOT NULL DEFAULT '',
    CHECK (answered OR http_status IS NULL)
);
CREATE INDEX provider_calls_operation_idx ON provider_calls (operation_id, id);

-- +goose Down
DROP TABLE provider_calls;

-- +goose Up
CREATE TABLE runs (
    id                  UUID PRIMARY KEY,
    owner_id            BIGINT NOT NULL REFERENCES users (id),
    order_id            BIGINT NOT NULL REFERENCES orders (id),
    amount              BIGINT NOT NULL CHECK (amount > 0),
    currency            TEXT NOT NULL,
    reason              TEXT NOT NULL,
    client_request_id   TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'created' CHECK (state IN (
                            'created', 'planning', 'awaiting_approval', 'submitting',
                            'reconciling', 'completed', 'failed', 'canceled')),
    -- last_seq is bumped under this row's lock by every append: it is the
    -- run's own ordered log counter.
    last_seq            BIGINT NOT NULL DEFAULT 0,
    -- Events with seq <= replay_floor may have been pruned: a cursor below it
    -- cannot be served from the log.
    replay_floor        BIGINT NOT NULL DEFAULT 0,
    cancel_requested_at TIMESTAMPTZ,
    lease_owner         TEXT,
    lease_expires_at    TIMESTAMPTZ,
    next_attempt_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at         TIMESTAMPTZ,
    UNIQUE (owner_id, client_request_id),
    CHECK (replay_floor <= last_seq)
);
CREATE INDEX runs_order_idx ON runs (order_id);
CREATE INDEX runs_owner_idx ON runs (owner_id, created_at DESC);
-- Workers look for unfinished runs whose next attempt is due.
CREATE INDEX runs_work_idx ON runs (next_attempt_at)
    WHERE state NOT IN ('completed', 'failed', 'canceled');

CREATE TABLE run_events (
    run_id     UUID NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL CHECK (seq > 0),
    event_id   UUID NOT NULL UNIQUE,
    type       TEXT NOT NULL,
    class      TEXT NOT NULL CHECK (class IN ('business', 'presentation')),
    payload    JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);
-- The pruner deletes old presentation events.
CREATE INDEX run_events_presentation_idx ON run_events (created_at)
    WHERE class = 'presentation';

-- The operation ledger: one row per external effect. Its id is the
-- provider's idempotency key.
CREATE TABLE operations (
    id           UUID PRIMARY KEY,
    run_id       UUID NOT NULL REFERENCES runs (id),
    order_id     BIGINT NOT NULL REFERENCES orders (id),
    kind         TEXT NOT NULL CHECK (kind IN ('refund')),
    amount       BIGINT NOT NULL CHECK (amount > 0),
    currency     TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('submitted', 'succeeded', 'failed', 'reconciling')),
    provider_ref TEXT,
    attempts     INT NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (run_id, kind),
    CHECK (state <> 'succeeded' OR provider_ref IS NOT NULL)
);
CREATE INDEX operations_order_idx ON operations (order_id);

CREATE TABLE approvals (
    id           BIGSERIAL PRIMARY KEY,
    run_id       UUID NOT NULL UNIQUE REFERENCES runs (id),
    requested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    decision     TEXT CHECK (decision IN ('approved')),
    decided_by   BIGINT REFERENCES users (id),
    decided_at   TIMESTAMPTZ,
    CHECK ((decision IS NULL) = (decided_at IS NULL))
);

-- The final answer, written once, in the transaction that completes the run.
CREATE TABLE final_messages (
    run_id     UUID PRIMARY KEY REFERENCES runs (id),
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE final_messages;
DROP TABLE approvals;
DROP TABLE operations;
DROP TABLE run_events;
DROP TABLE runs;

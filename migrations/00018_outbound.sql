-- +goose Up
-- The outcome reaches people who are not watching (DESIGN rule 18): one
-- outbound engine reads the committed business events and delivers them to
-- webhook endpoints and, as emails, to people.

-- outbound_queue is the outbox: every business event lands here in the
-- transaction that appends it (the trigger below), and the engine's
-- dispatcher fans each one out to its destinations (webhook_deliveries,
-- mails) and deletes it, one dispatcher at a time (an advisory lock), so a
-- run's events are fanned out in seq order. Narration never enters it.
CREATE TABLE outbound_queue (
    id             BIGSERIAL PRIMARY KEY,
    run_id         UUID NOT NULL,
    seq            BIGINT NOT NULL,
    event_id       UUID NOT NULL,
    type           TEXT NOT NULL,
    correlation_id UUID NOT NULL,
    parent_run_id  UUID,
    created_at     TIMESTAMPTZ NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION outbound_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbound_queue (run_id, seq, event_id, type, correlation_id, parent_run_id, created_at)
    VALUES (NEW.run_id, NEW.seq, NEW.event_id, NEW.type, NEW.correlation_id, NEW.parent_run_id, NEW.created_at);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER run_events_outbound AFTER INSERT ON run_events
    FOR EACH ROW WHEN (NEW.class = 'business') EXECUTE FUNCTION outbound_enqueue();

-- A webhook endpoint an admin registered. event_types NULL: every business
-- event. secret is the current signing secret (whsec_…); during a rotation
-- previous_secret signs too, until previous_until. A disabled endpoint
-- keeps receiving fan-out (its deliveries wait), so re-enabling it goes on
-- from where it stopped. failing_since: the first failure since the last
-- success; an endpoint failing for WEBHOOK_DISABLE_AFTER is disabled.
CREATE TABLE webhook_endpoints (
    id              UUID PRIMARY KEY,
    url             TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    description     TEXT NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    event_types     TEXT[],
    secret          TEXT NOT NULL,
    previous_secret TEXT,
    previous_until  TIMESTAMPTZ,
    created_by      BIGINT REFERENCES users (id),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    disabled_at     TIMESTAMPTZ,
    disabled_reason TEXT,
    failing_since   TIMESTAMPTZ
);

-- One business event for one endpoint. Per (endpoint, run) only the
-- lowest-seq pending delivery is ever sent (per run in seq order); runs go
-- in parallel. A worker holds one by a lease while it sends it.
-- state: pending (not yet acknowledged), delivered (2xx), skipped (an admin
-- re-enabled the endpoint from a later time).
CREATE TABLE webhook_deliveries (
    endpoint_id     UUID NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    run_id          UUID NOT NULL,
    seq             BIGINT NOT NULL,
    event_id        UUID NOT NULL,
    type            TEXT NOT NULL,
    event_at        TIMESTAMPTZ NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'skipped')),
    attempts        INT NOT NULL DEFAULT 0,
    next_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    leased_until    TIMESTAMPTZ,
    last_status     INT,
    last_error      TEXT,
    last_duration_ms INT,
    last_attempt_at TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    -- resend_at: an admin asked to send an acknowledged delivery again
    -- ("send again"): a replay, outside the per-run order, that changes
    -- nothing of its state.
    resend_at       TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint_id, run_id, seq)
);
CREATE INDEX webhook_deliveries_run_idx ON webhook_deliveries (run_id, seq);
-- What is due, per endpoint (so a disabled endpoint's backlog is never
-- read), what an endpoint still owes (its lag), and the resends asked for:
-- read at every turn of the engine, none may scan what was delivered.
CREATE INDEX webhook_deliveries_next_idx ON webhook_deliveries (endpoint_id, next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (endpoint_id, event_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_resend_idx ON webhook_deliveries (resend_at) WHERE resend_at IS NOT NULL;

-- Every attempt of a delivery, for the admin's page (recent deliveries).
CREATE TABLE webhook_attempts (
    id          BIGSERIAL PRIMARY KEY,
    endpoint_id UUID NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    run_id      UUID NOT NULL,
    seq         BIGINT NOT NULL,
    event_id    UUID NOT NULL,
    attempt     INT NOT NULL,
    status      INT,
    error       TEXT,
    duration_ms INT NOT NULL,
    next_at     TIMESTAMPTZ,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, id DESC);

-- The mail ledger: one row per email, keyed by its deterministic
-- Message-ID, written before it is sent (state pending) and completed after
-- (sent). A worker that dies between the SMTP server's accept and the
-- record leaves the row pending; it is sent again with the same
-- Message-ID. kind: 'ended' (to the customer, when a request ends) or
-- 'waiting' (to an approver, when a request starts waiting).
CREATE TABLE mails (
    message_id   TEXT PRIMARY KEY,
    run_id       UUID NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('ended', 'waiting')),
    user_id      BIGINT REFERENCES users (id),
    recipient    TEXT NOT NULL,
    subject      TEXT NOT NULL,
    body         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
    attempts     INT NOT NULL DEFAULT 0,
    next_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    leased_until TIMESTAMPTZ,
    last_error   TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at      TIMESTAMPTZ,
    UNIQUE (run_id, kind, recipient)
);
CREATE INDEX mails_due_idx ON mails (next_at) WHERE state = 'pending';
CREATE INDEX mails_run_idx ON mails (run_id);

-- +goose Down
DROP TABLE mails;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
DROP TRIGGER run_events_outbound ON run_events;
DROP FUNCTION outbound_enqueue();
DROP TABLE outbound_queue;

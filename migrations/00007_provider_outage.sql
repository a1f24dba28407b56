-- +goose Up
-- Provider outages are ridden out for a budget of time counted from an
-- operation's first refusal (a 503 or 429: the provider committed nothing),
-- so the count of resumes and reconcile passes never decides when a run
-- fails. refusals sets the backoff between tries. last_call_refused says the
-- latest call about the operation was refused and none has begun since: a
-- resumed worker may then call again with the same key without first asking
-- the provider, as nothing about the operation is unknown.
ALTER TABLE operations
    ADD COLUMN first_refused_at  TIMESTAMPTZ,
    ADD COLUMN refusals          INT NOT NULL DEFAULT 0,
    ADD COLUMN last_call_refused BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE operations
    DROP COLUMN last_call_refused,
    DROP COLUMN refusals,
    DROP COLUMN first_refused_at;

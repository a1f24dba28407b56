-- +goose Up
-- Who did what, when and from where: logins, grant and role changes,
-- decisions on runs, disabled users, API tokens. Written in the transaction
-- of the change it records; never updated.
CREATE TABLE audit_log (
    id       BIGSERIAL PRIMARY KEY,
    at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor_id BIGINT REFERENCES users (id),
    actor_ip TEXT NOT NULL DEFAULT '',
    action   TEXT NOT NULL,
    subject  TEXT NOT NULL DEFAULT '',
    details  JSONB NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);

-- API tokens: only the SHA-256 of the token is kept; the token itself is
-- shown once, when it is made.
CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT NOT NULL CHECK (name <> ''),
    token_hash   BYTEA NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

-- Failed (and in-flight) login attempts, one row per throttled key: the
-- SHA-256 of "account:<email>" or "address:<ip>", so neither a typed email
-- nor anything typed by mistake into the email field is kept in clear.
-- A table rather than process memory so the limit holds across every serve
-- process of a deployment.
CREATE TABLE login_attempts (
    key        BYTEA NOT NULL,
    attempt_id UUID NOT NULL,
    at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_attempts_key_idx ON login_attempts (key, at);
CREATE INDEX login_attempts_at_idx ON login_attempts (at);

-- +goose Down
DROP TABLE login_attempts;
DROP TABLE api_tokens;
DROP TABLE audit_log;

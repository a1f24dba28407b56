-- +goose Up
-- Server-side sessions: the cookie carries a random session ID, the table
-- only its SHA-256. Logging out deletes the row, so a copied cookie dies with
-- the session; a login always starts a new one.
CREATE TABLE sessions (
    id_hash    BYTEA PRIMARY KEY CHECK (length(id_hash) = 32),
    user_id    BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- +goose Down
DROP TABLE sessions;

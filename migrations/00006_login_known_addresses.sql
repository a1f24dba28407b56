-- +goose Up
-- Addresses an account has signed in from: a correct password from one of
-- them is checked even while the account's budget for failed guesses is
-- spent by others (store/login.go), so an attacker spraying guesses from
-- elsewhere cannot lock the owner out. The key is the SHA-256 of the
-- account's email and the address, like login_attempts' keys.
CREATE TABLE login_known_addresses (
    key        BYTEA PRIMARY KEY CHECK (length(key) = 32),
    last_login TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX login_known_addresses_last_idx ON login_known_addresses (last_login);

-- +goose Down
DROP TABLE login_known_addresses;

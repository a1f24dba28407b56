-- +goose Up
-- The language the customer asked in (a BCP 47 tag the catalogues speak;
-- '': from before languages, English): the agent narrates in it, and the
-- customer's emails are written in it when they saved no language.
ALTER TABLE runs ADD COLUMN language TEXT NOT NULL DEFAULT ''
    CHECK (language = '' OR language ~ '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$');

-- +goose Down
ALTER TABLE runs DROP COLUMN language;

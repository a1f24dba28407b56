-- +goose Up
-- The language a user chose with the picker (a BCP 47 tag the catalogues
-- speak, such as zh-CN); '': their browser's Accept-Language decides.
ALTER TABLE users ADD COLUMN language TEXT NOT NULL DEFAULT ''
    CHECK (language = '' OR language ~ '^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$');

-- +goose Down
ALTER TABLE users DROP COLUMN language;

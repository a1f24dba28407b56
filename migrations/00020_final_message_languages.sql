-- +goose Up
-- A final answer in each language the words table speaks besides English
-- (body), by BCP 47 tag: {"zh-CN": "已退款 299 元……"}. Written once, when
-- the run ends; '{}' for answers from before languages.
ALTER TABLE final_messages ADD COLUMN body_in JSONB NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(body_in) = 'object');

-- +goose Down
ALTER TABLE final_messages DROP COLUMN body_in;

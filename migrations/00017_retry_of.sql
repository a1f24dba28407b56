-- +goose Up
-- Asking again: a request that ended without a refund may be asked again as
-- a new request, with its own key, that names the run it asks again for.
-- The old run is never changed: the link lives on the new run alone, and a
-- run's "asked again" are found through the index.
ALTER TABLE runs ADD COLUMN retry_of UUID REFERENCES runs (id);
CREATE INDEX runs_retry_of_idx ON runs (retry_of) WHERE retry_of IS NOT NULL;

-- +goose Down
DROP INDEX runs_retry_of_idx;
ALTER TABLE runs DROP COLUMN retry_of;

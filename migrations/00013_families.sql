-- +goose Up
-- One request, several runs (a family): a parent run (kind 'request', the
-- coordinating agent, no order of its own) and one child run per order
-- (kind 'refund', as every run was before). Causality across a family is
-- carried by parent_run_id and correlation_id (the root run's ID), never by
-- a global order: each run keeps its own seq. A child's place in its family
-- is position (1, 2, …; 0 for a root), which orders the family's cursor.
ALTER TABLE runs
    ADD COLUMN kind TEXT NOT NULL DEFAULT 'refund' CHECK (kind IN ('refund', 'request')),
    ADD COLUMN parent_run_id UUID REFERENCES runs (id),
    ADD COLUMN correlation_id UUID,
    ADD COLUMN position INT NOT NULL DEFAULT 0,
    ALTER COLUMN order_id DROP NOT NULL;
UPDATE runs SET correlation_id = id;
ALTER TABLE runs
    ALTER COLUMN correlation_id SET NOT NULL,
    -- Read as the run's order_id: 0 for a request, which has none.
    ADD COLUMN order_ref BIGINT GENERATED ALWAYS AS (COALESCE(order_id, 0)) STORED,
    ADD CONSTRAINT runs_kind_order CHECK ((kind = 'refund') = (order_id IS NOT NULL)),
    ADD CONSTRAINT runs_family CHECK ((parent_run_id IS NULL) = (correlation_id = id)),
    ADD CONSTRAINT runs_position CHECK ((parent_run_id IS NULL) = (position = 0));
-- A family's children carry its Idempotency-Key too: the key names the
-- request, so it is unique among roots only.
ALTER TABLE runs DROP CONSTRAINT runs_owner_id_client_request_id_key;
CREATE UNIQUE INDEX runs_request_key ON runs (owner_id, client_request_id) WHERE parent_run_id IS NULL;
CREATE UNIQUE INDEX runs_children_idx ON runs (parent_run_id, position) WHERE parent_run_id IS NOT NULL;
CREATE INDEX runs_correlation_idx ON runs (correlation_id);

-- Every event carries its run's family, so a reader of any log (a stream,
-- the CLI, a row in psql) tells parent and child apart without a join.
ALTER TABLE run_events
    ADD COLUMN parent_run_id UUID,
    ADD COLUMN correlation_id UUID;
UPDATE run_events SET correlation_id = run_id;
ALTER TABLE run_events ALTER COLUMN correlation_id SET NOT NULL;

-- +goose Down
ALTER TABLE run_events DROP COLUMN correlation_id, DROP COLUMN parent_run_id;
ALTER TABLE runs DROP CONSTRAINT runs_position, DROP CONSTRAINT runs_family, DROP CONSTRAINT runs_kind_order;
UPDATE runs SET parent_run_id = NULL, client_request_id = client_request_id || ' #' || id WHERE position > 0;
DELETE FROM final_messages WHERE run_id IN (SELECT id FROM runs WHERE kind = 'request');
DELETE FROM runs WHERE kind = 'request';
DROP INDEX runs_request_key;
ALTER TABLE runs ADD CONSTRAINT runs_owner_id_client_request_id_key UNIQUE (owner_id, client_request_id),
    DROP COLUMN order_ref, DROP COLUMN position, DROP COLUMN correlation_id, DROP COLUMN parent_run_id,
    DROP COLUMN kind, ALTER COLUMN order_id SET NOT NULL;

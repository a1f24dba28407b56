-- +goose Up
-- The approval queue: the runs that wait for an approver's decision
-- (awaiting_approval, no cancel asked for), kept by a trigger in the
-- transaction that changes the run, whatever path changes it.
--
-- queue_head.version counts the queue's changes. It is bumped under that
-- one row's lock, so versions commit in order (a sequence would not): a
-- reader that saw version N and reads again sees every change after N.
-- Queue changes are rare (a request, a decision), so the lock costs little.
CREATE TABLE queue_head (
    only_row BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
    version  BIGINT NOT NULL DEFAULT 0
);
INSERT INTO queue_head DEFAULT VALUES;

-- One row per queued run. version is the queue version that added it: the
-- queue's order, oldest first, and the key its pages are read by.
CREATE TABLE queue_entries (
    run_id     UUID PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    version    BIGINT NOT NULL UNIQUE,
    entered_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE FUNCTION queue_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_in BOOLEAN := TG_OP = 'UPDATE' AND OLD.state = 'awaiting_approval' AND OLD.cancel_requested_at IS NULL;
    now_in BOOLEAN := NEW.state = 'awaiting_approval' AND NEW.cancel_requested_at IS NULL;
    v BIGINT;
BEGIN
    IF was_in = now_in THEN
        RETURN NULL;
    END IF;
    UPDATE queue_head SET version = version + 1 RETURNING version INTO v;
    IF now_in THEN
        INSERT INTO queue_entries (run_id, version) VALUES (NEW.id, v);
    ELSE
        DELETE FROM queue_entries WHERE run_id = NEW.id;
    END IF;
    -- Delivered at commit; it only wakes the queue's streams.
    PERFORM pg_notify('refundd_queue', v::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER runs_queue AFTER INSERT OR UPDATE OF state, cancel_requested_at ON runs
    FOR EACH ROW EXECUTE FUNCTION queue_track();

-- The runs already waiting, in the order they asked.
INSERT INTO queue_entries (run_id, version, entered_at)
SELECT r.id, row_number() OVER (ORDER BY a.requested_at, r.id), a.requested_at
FROM runs r JOIN approvals a ON a.run_id = r.id
WHERE r.state = 'awaiting_approval' AND r.cancel_requested_at IS NULL;
UPDATE queue_head SET version = (SELECT count(*) FROM queue_entries);

-- +goose Down
DROP TRIGGER runs_queue ON runs;
DROP FUNCTION queue_track();
DROP TABLE queue_entries;
DROP TABLE queue_head;

-- +goose Up
-- A failover to a standby that lacked the primary's last seconds makes the
-- database forget what it committed in them; the payment provider forgets
-- nothing. Three things let refundd find its refunds again (README,
-- "Database failover").
--
-- installation.id names this installation: the namespace of the provider
-- keys derived from what the customer asked (store.RefundKey), so two
-- installations that share a provider account never share a key. It is
-- written once, here, long before any refund, so no failover can lose it.
CREATE TABLE installation (
    only_row BOOLEAN PRIMARY KEY DEFAULT true CHECK (only_row),
    id       UUID NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO installation DEFAULT VALUES;

-- db_timelines are the PostgreSQL timelines this database has written on.
-- A promotion (or a point-in-time restore) starts a new timeline; the
-- first check on it (store.CheckTimeline) records it and marks every
-- unfinished run for a provider check.
CREATE TABLE db_timelines (
    timeline_id INT PRIMARY KEY,
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO db_timelines (timeline_id)
SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int;

-- provider_check: before the run's next step, ask the payment provider
-- what it holds under the run's key. CheckTimeline sets it on every
-- unfinished run after a promotion. (A new run asks once before its first
-- step anyway: its start may be a client's retry of one the database
-- forgot.)
ALTER TABLE runs ADD COLUMN provider_check BOOLEAN NOT NULL DEFAULT false;

-- recovered: the operation was found at the provider under its key after
-- the database had lost its record of it (store.RecordFound), not made now.
ALTER TABLE operations ADD COLUMN recovered BOOLEAN NOT NULL DEFAULT false;

-- A run being checked is not in the approval queue: nobody is asked to
-- decide a refund the provider may already have made.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION queue_track() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_in BOOLEAN := TG_OP = 'UPDATE' AND OLD.state = 'awaiting_approval' AND OLD.cancel_requested_at IS NULL
        AND NOT OLD.provider_check;
    now_in BOOLEAN := NEW.state = 'awaiting_approval' AND NEW.cancel_requested_at IS NULL AND NOT NEW.provider_check;
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
DROP TRIGGER runs_queue ON runs;
CREATE TRIGGER runs_queue AFTER INSERT OR UPDATE OF state, cancel_requested_at, provider_check ON runs
    FOR EACH ROW EXECUTE FUNCTION queue_track();

-- +goose Down
DROP TRIGGER runs_queue ON runs;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION queue_track() RETURNS trigger LANGUAGE plpgsql AS $$
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
    PERFORM pg_notify('refundd_queue', v::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER runs_queue AFTER INSERT OR UPDATE OF state, cancel_requested_at ON runs
    FOR EACH ROW EXECUTE FUNCTION queue_track();
ALTER TABLE operations DROP COLUMN recovered;
ALTER TABLE runs DROP COLUMN provider_check;
DROP TABLE db_timelines;
DROP TABLE installation;

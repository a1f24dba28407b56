-- +goose Up
-- unsent says that no refund call about the operation can have reached the
-- payment provider: none has begun, or each one's answer proved it committed
-- nothing (a 503 before commit, a refused connection). While every operation
-- of a run is unsent a cancel is in time: the run ends canceled and no call
-- is begun after it. A call is marked (unsent false) under the run's row
-- lock before it is made, as a cancel decides under that lock, so the two
-- cannot cross. Rows from before are taken to have been sent: their calls
-- were not marked.
ALTER TABLE operations ADD COLUMN unsent BOOLEAN NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE operations DROP COLUMN unsent;

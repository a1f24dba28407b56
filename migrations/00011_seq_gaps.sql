-- +goose Up
-- The seqs the first append after a restart skips (migration 00008) were
-- marked by raising replay_floor, and every page then read them as history
-- retention had removed. A gap is not a loss: replay_floor is again only
-- where retention removed events, and seq_gaps records each skip by the
-- last seq before it (g): seqs g+1 .. g+1000 (store.seqEpochGap) were never
-- kept, and a cursor among them was ahead of the log, so it is a reset.
ALTER TABLE runs ADD COLUMN seq_gaps BIGINT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE runs DROP COLUMN seq_gaps;

-- +goose Up
-- Narration commits without waiting for the WAL flush, so a crash of
-- PostgreSQL may lose the last few narration events after clients saw them
-- (and their seqs). last_seq then falls back, and the next append would
-- reuse a seq a client already holds as its cursor, naming a different
-- event. seq_epoch is the postmaster start time of the run's last append:
-- the first append after any restart sees it changed and skips a gap of
-- seqs, raising replay_floor to the gap's end, so every seq handed out
-- before the restart is either still in the log or below the floor (a
-- reset), never reused.
ALTER TABLE runs
    ADD COLUMN seq_epoch TIMESTAMPTZ NOT NULL DEFAULT pg_postmaster_start_time();

-- +goose Down
ALTER TABLE runs DROP COLUMN seq_epoch;

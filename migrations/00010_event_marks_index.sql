-- +goose Up
-- A snapshot head (a stream that resumes from its cursor) reads only the
-- events that say who decided and where a step began again (store.MarkTypes),
-- never the whole log: this index holds just those rows. Its predicate must
-- match store.marksSQL's literal list.
CREATE INDEX run_events_marks_idx ON run_events (run_id, seq)
    WHERE type IN ('approval.granted', 'cancel.requested', 'step.attempt');

-- +goose Down
DROP INDEX run_events_marks_idx;

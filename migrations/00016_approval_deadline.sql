-- +goose Up
-- Decisions end (APPROVAL_DEADLINE). An approval request carries until when
-- an approver may decide, fixed when the run asks (so a page, the queue and
-- the worker that expires it all read the same moment, whatever the setting
-- of the process that reads it); NULL: no deadline, as for the requests made
-- before this migration. A request nobody decided in time is 'expired':
-- decided by the system, by no one (decided_by stays NULL).
ALTER TABLE approvals
    ADD COLUMN deadline TIMESTAMPTZ,
    ADD CONSTRAINT approvals_deadline CHECK (deadline IS NULL OR deadline >= requested_at),
    DROP CONSTRAINT approvals_decision_check,
    ADD CONSTRAINT approvals_decision_check CHECK (decision IN ('approved', 'expired')),
    ADD CONSTRAINT approvals_expired_by CHECK (decision IS DISTINCT FROM 'expired' OR decided_by IS NULL);

-- The workers' alarm reads the next deadline still open (store.NextDeadline).
CREATE INDEX approvals_deadline_idx ON approvals (deadline)
    WHERE decision IS NULL AND deadline IS NOT NULL;

-- +goose Down
DROP INDEX approvals_deadline_idx;
UPDATE approvals SET decision = NULL, decided_at = NULL WHERE decision = 'expired';
ALTER TABLE approvals
    DROP CONSTRAINT approvals_expired_by,
    DROP CONSTRAINT approvals_decision_check,
    ADD CONSTRAINT approvals_decision_check CHECK (decision IN ('approved')),
    DROP CONSTRAINT approvals_deadline,
    DROP COLUMN deadline;

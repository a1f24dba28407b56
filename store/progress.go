package store

import (
	"database/sql"
	"encoding/json"

	"github.com/google/uuid"
)

// StateAfter is the run state an event records, "" for an event that leaves
// the state as it was. Every state change appends its event in the same
// transaction (see Mutate), so folding a log with StateAfter gives the state
// the run's row held at that seq.
func StateAfter(eventType string) string {
	switch eventType {
	case EventRunCreated:
		return StateCreated
	case EventRunPlanning:
		return StatePlanning
	case EventApprovalRequested:
		return StateAwaitingApproval
	case EventApprovalGranted, EventOperationSubmitted:
		return StateSubmitting
	case EventOperationReconciling:
		return StateReconciling
	case EventRunCompleted:
		return StateCompleted
	case EventRunFailed:
		return StateFailed
	case EventRunCanceled:
		return StateCanceled
	}
	return ""
}

// operationStateAfter is the ledger state an operation event records, ""
// for an event about no operation.
func operationStateAfter(eventType string) string {
	switch eventType {
	case EventOperationSubmitted:
		return OpSubmitted
	case EventOperationSucceeded:
		return OpSucceeded
	case EventOperationFailed:
		return OpFailed
	case EventOperationReconciling:
		return OpReconciling
	}
	return ""
}

// Progress is where a run stands as of CoveringSeq: its state, whether a
// cancel was asked for, its ledger and its final message. It starts from a
// snapshot and is moved forward by the events after it, so a page and the
// stream that continues it tell the same story. It keeps no narration or
// timeline: a long stream holds no growing history.
type Progress struct {
	Run             *Run
	State           string
	CancelRequested bool
	CoveringSeq     int64
	Operations      []Operation
	FinalMessage    string
}

// ProgressOf is where the snapshot's run stands.
func ProgressOf(snap *Snapshot) Progress {
	p := Progress{
		Run:             snap.Run,
		State:           snap.Run.State,
		CancelRequested: snap.Run.CancelRequested(),
		CoveringSeq:     snap.CoveringSeq,
		// A copy: Apply changes operations in place, and the snapshot may
		// be shared.
		Operations: append([]Operation(nil), snap.Operations...),
	}
	if snap.FinalMessage != nil {
		p.FinalMessage = snap.FinalMessage.Body
	}
	return p
}

// Terminal reports whether the run, as of CoveringSeq, has ended.
func (p *Progress) Terminal() bool { return Terminal(p.State) }

// progressPayload is the union of the payload fields Apply reads.
type progressPayload struct {
	Body        string `json:"body"`
	OperationID string `json:"operation_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	ProviderRef string `json:"provider_ref"`
	Reason      string `json:"reason"`
}

// Apply moves the progress forward by one event. Events may arrive again
// (delivery is at least once), so applying an older one never undoes a
// finish or a settled operation.
func (p *Progress) Apply(ev Event) {
	if ev.Seq > p.CoveringSeq {
		p.CoveringSeq = ev.Seq
	}
	// A finished run stays finished, whatever older event a replay shows.
	if s := StateAfter(ev.Type); s != "" && (!p.Terminal() || Terminal(s)) {
		p.State = s
	}
	switch opState := operationStateAfter(ev.Type); {
	case ev.Type == EventCancelRequested:
		p.CancelRequested = true
	case ev.Type == EventMessageFinal:
		if pl, ok := decodeProgress(ev); ok {
			p.FinalMessage = pl.Body
		}
	case opState != "":
		if pl, ok := decodeProgress(ev); ok {
			p.applyOperation(ev.RunID, opState, pl)
		}
	}
}

// decodeProgress reads the fields Apply needs from an event's payload. The
// store wrote every payload itself; one it cannot read (false) changes
// only what the event's type says.
func decodeProgress(ev Event) (progressPayload, bool) {
	var pl progressPayload
	err := json.Unmarshal(ev.Payload, &pl)
	return pl, err == nil
}

// applyOperation records what an operation event says about its ledger row,
// adding the row when the event is the first news of it.
func (p *Progress) applyOperation(runID uuid.UUID, state string, pl progressPayload) {
	id, err := uuid.Parse(pl.OperationID)
	if err != nil {
		return // an operation event always names its operation; this one names none
	}
	ref := sql.NullString{String: pl.ProviderRef, Valid: pl.ProviderRef != ""}
	for i := range p.Operations {
		op := &p.Operations[i]
		if op.ID != id {
			continue
		}
		// succeeded and failed are final in the ledger.
		if op.State != OpSucceeded && op.State != OpFailed {
			op.State = state
		}
		if ref.Valid {
			op.ProviderRef = ref
		}
		if pl.Reason != "" {
			op.LastError = pl.Reason
		}
		return
	}
	p.Operations = append(p.Operations, Operation{ID: id, RunID: runID, Kind: "refund", Amount: pl.Amount,
		Currency: pl.Currency, State: state, ProviderRef: ref, LastError: pl.Reason})
}

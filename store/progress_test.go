package store_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// logEvent builds an event of a run's log as the store would hand it out.
func logEvent(tb testing.TB, runID uuid.UUID, seq int64, typ string, payload any) store.Event {
	tb.Helper()
	p, err := json.Marshal(payload)
	if err != nil {
		tb.Fatal(err)
	}
	return store.Event{RunID: runID, Seq: seq, Type: typ, Class: store.ClassOf(typ), Payload: p, CreatedAt: time.Unix(1700000000, 0)}
}

func planningSnapshot() *store.Snapshot {
	run := &store.Run{ID: uuid.New(), OwnerID: 1, OrderID: 3, Amount: 500, Currency: "EUR", Reason: "broken",
		State: store.StatePlanning, LastSeq: 4}
	return &store.Snapshot{Run: run, CoveringSeq: 4}
}

func TestProgress_ApplyFollowsTheLog(t *testing.T) {
	t.Parallel()
	snap := planningSnapshot()
	p := store.ProgressOf(snap)
	if p.State != store.StatePlanning || p.CoveringSeq != 4 || p.Terminal() {
		t.Fatalf("progress of the snapshot = %+v, want planning at seq 4", p)
	}
	id := snap.Run.ID
	opID := uuid.New()
	for _, step := range []struct {
		e      store.Event
		state  string
		cancel bool
	}{
		{logEvent(t, id, 5, store.EventApprovalRequested, nil), store.StateAwaitingApproval, false},
		{logEvent(t, id, 6, store.EventApprovalGranted, map[string]any{"by": 9}), store.StateSubmitting, false},
		{logEvent(t, id, 7, store.EventOperationSubmitted, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR"}), store.StateSubmitting, false},
		{logEvent(t, id, 8, store.EventNarrationDelta, map[string]string{"text": "still here"}), store.StateSubmitting, false},
		{logEvent(t, id, 9, store.EventOperationReconciling, map[string]any{"operation_id": opID, "reason": "timeout"}), store.StateReconciling, false},
		{logEvent(t, id, 10, store.EventCancelRequested, map[string]any{"by": 1}), store.StateReconciling, true},
		{logEvent(t, id, 11, store.EventOperationSucceeded, map[string]any{"operation_id": opID, "amount": 500, "currency": "EUR", "provider_ref": "re_1"}), store.StateReconciling, true},
		{logEvent(t, id, 12, store.EventMessageFinal, map[string]string{"body": "Refunded."}), store.StateReconciling, true},
		{logEvent(t, id, 13, store.EventRunCompleted, nil), store.StateCompleted, true},
	} {
		p.Apply(step.e)
		if p.State != step.state || p.CancelRequested != step.cancel {
			t.Errorf("after %s: state %s, cancel requested %v; want %s, %v", step.e.Type, p.State, p.CancelRequested, step.state, step.cancel)
		}
	}
	if len(p.Operations) != 1 || p.Operations[0].State != store.OpSucceeded || p.Operations[0].ProviderRef.String != "re_1" ||
		p.Operations[0].Amount != 500 || p.Operations[0].LastError != "timeout" {
		t.Errorf("operations = %+v, want one succeeded with its reference", p.Operations)
	}
	if p.FinalMessage != "Refunded." || p.CoveringSeq != 13 || !p.Terminal() {
		t.Errorf("final %q, covering %d, terminal %v; want Refunded., 13, true", p.FinalMessage, p.CoveringSeq, p.Terminal())
	}
	if len(snap.Operations) != 0 {
		t.Errorf("the snapshot's ledger changed: %+v", snap.Operations)
	}
}

// TestProgress_ReplayNeverTakesBack: delivery is at least once, so an older
// event that arrives again never undoes a finish or a settled operation.
func TestProgress_ReplayNeverTakesBack(t *testing.T) {
	t.Parallel()
	snap := planningSnapshot()
	opID := uuid.New()
	snap.Run.State, snap.Run.LastSeq, snap.CoveringSeq = store.StateCompleted, 9, 9
	snap.Operations = []store.Operation{{ID: opID, Amount: 500, Currency: "EUR", State: store.OpSucceeded}}
	snap.FinalMessage = &store.FinalMessage{Body: "Refunded."}
	p := store.ProgressOf(snap)
	for _, e := range []store.Event{
		logEvent(t, snap.Run.ID, 5, store.EventApprovalRequested, nil),
		logEvent(t, snap.Run.ID, 6, store.EventOperationReconciling, map[string]any{"operation_id": opID, "reason": "timeout"}),
	} {
		p.Apply(e)
	}
	if p.State != store.StateCompleted || p.Operations[0].State != store.OpSucceeded || p.CoveringSeq != 9 {
		t.Errorf("after replays: state %s, operation %s, covering %d; want completed, succeeded, 9",
			p.State, p.Operations[0].State, p.CoveringSeq)
	}
	if snap.Operations[0].LastError != "" {
		t.Error("Apply changed the snapshot's ledger")
	}
}

func TestStateAfter_NamesOnlyRunStates(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{store.EventRunCreated, store.EventRunPlanning, store.EventActionProposed,
		store.EventApprovalRequested, store.EventApprovalGranted, store.EventCancelRequested, store.EventCancelTooLate,
		store.EventOperationSubmitted, store.EventOperationSucceeded, store.EventOperationFailed,
		store.EventOperationReconciling, store.EventMessageFinal, store.EventRunCompleted, store.EventRunFailed,
		store.EventRunCanceled, store.EventNarrationDelta} {
		if s := store.StateAfter(typ); s != "" && !slices.Contains(store.States, s) {
			t.Errorf("StateAfter(%s) = %q, not a run state", typ, s)
		}
	}
	reached := map[string]bool{}
	for _, typ := range []string{store.EventRunCreated, store.EventRunPlanning, store.EventApprovalRequested,
		store.EventApprovalGranted, store.EventOperationReconciling, store.EventRunCompleted, store.EventRunFailed,
		store.EventRunCanceled} {
		reached[store.StateAfter(typ)] = true
	}
	for _, s := range store.States {
		if !reached[s] {
			t.Errorf("no event records state %s", s)
		}
	}
}

// TestProgress_StreamNeverClaimsACancelInTime: a page read while every
// call was refused (its operation unsent) may offer a cancel; the events
// after it cannot say whether a call began since, so once a cancel or an
// outcome being verified arrives the progress no longer says the cancel
// can stop the money: it says only what is true either way.
func TestProgress_StreamNeverClaimsACancelInTime(t *testing.T) {
	t.Parallel()
	for _, e := range []struct {
		typ     string
		payload map[string]any
	}{
		{store.EventCancelRequested, map[string]any{"by": 1}},
		{store.EventOperationReconciling, nil},
	} {
		t.Run(e.typ, func(t *testing.T) {
			snap := planningSnapshot()
			opID := uuid.New()
			snap.Run.State = store.StateSubmitting
			snap.Operations = []store.Operation{{ID: opID, Amount: 500, Currency: "EUR", State: store.OpSubmitted, Unsent: true}}
			p := store.ProgressOf(snap)
			if store.CancelTooLate(p.Operations) {
				t.Fatal("a snapshot whose operation was never sent says a cancel is too late")
			}
			if e.payload == nil {
				e.payload = map[string]any{"operation_id": opID, "reason": "timeout"}
			}
			p.Apply(logEvent(t, snap.Run.ID, 5, e.typ, e.payload))
			if !store.CancelTooLate(p.Operations) {
				t.Errorf("after %s the progress still says a cancel stops the money", e.typ)
			}
			if !snap.Operations[0].Unsent {
				t.Error("Apply changed the snapshot's ledger")
			}
		})
	}
}

package store_test

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// eventSample is a payload with every field set, the JSON keys it is
// stored with (as they were before payloads had types), and its reader.
type eventSample struct {
	want store.Payload
	keys string
	read func(store.Event) (store.Payload, error)
}

func sampleOf[P store.Payload](p P, keys string) eventSample {
	return eventSample{want: p, keys: keys, read: func(ev store.Event) (store.Payload, error) {
		return store.PayloadOf[P](ev)
	}}
}

func eventSamples() []eventSample {
	op := store.OperationFacts{OperationID: uuid.MustParse("0190a5d4-0000-7000-8000-000000000001"), Amount: 1250, Currency: "EUR"}
	deadline := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	person := store.DecidedBy{By: store.DeciderRef{UserID: 7}, ByRole: store.RoleApprover, ByName: "Ann", Reason: "ok"}
	return []eventSample{
		sampleOf(store.RunCreated{OrderID: 3, Amount: 1250, Currency: "EUR", Reason: "broken"}, "amount currency order_id reason"),
		sampleOf(store.RunPlanning{}, ""),
		sampleOf(store.ActionProposed{Action: "refund", OrderID: 3, Amount: 1250, Currency: "EUR"}, "action amount currency order_id"),
		sampleOf(store.ApprovalRequested{}, ""),
		sampleOf(store.ApprovalRequested{Deadline: &deadline}, "deadline"),
		sampleOf(store.ApprovalGranted{DecidedBy: person}, "by by_name by_role reason"),
		sampleOf(store.ApprovalGranted{DecidedBy: store.DecidedBy{By: store.DeciderRef{Policy: true}}}, "by"),
		sampleOf(store.ApprovalExpired{RequestedAt: deadline.Add(-48 * time.Hour), Deadline: deadline}, "deadline requested_at"),
		sampleOf(store.CancelRequested{DecidedBy: person}, "by by_name by_role reason"),
		sampleOf(store.CancelTooLatePayload{OperationID: op.OperationID}, "operation_id"),
		sampleOf(store.OperationSubmitted{OperationFacts: op}, "amount currency operation_id"),
		sampleOf(store.OperationSucceeded{OperationFacts: op, ProviderRef: "re_1"}, "amount currency operation_id provider_ref"),
		sampleOf(store.OperationFailed{OperationFacts: op, Reason: "declined"}, "amount currency operation_id reason"),
		// A failure's and a reconcile's reason is written even when empty.
		sampleOf(store.OperationReconciling{OperationFacts: op}, "amount currency operation_id reason"),
		sampleOf(store.MessageFinal{Body: "Refunded."}, "body"),
		sampleOf(store.RunCompleted{State: store.StateCompleted}, "state"),
		sampleOf(store.RunFailed{State: store.StateFailed}, "state"),
		sampleOf(store.RunCanceled{State: store.StateCanceled}, "state"),
		sampleOf(store.NarrationDelta{Text: "Looking. "}, "text"),
		sampleOf(store.StepAttempt{Step: "planning", Attempt: 2}, "attempt step"),
		sampleOf(store.RunCreated{Amount: 1500, Currency: "EUR", Reason: "late", Refunds: []store.RefundItem{{OrderID: 3, Amount: 1250}, {OrderID: 4, Amount: 250}}},
			"amount currency order_id reason refunds"),
		sampleOf(store.ChildStarted{ChildRunID: op.OperationID, Position: 1, OrderID: 3, Amount: 1250, Currency: "EUR"},
			"amount child_run_id currency order_id position"),
		sampleOf(store.ChildFinished{ChildRunID: op.OperationID, OrderID: 3, State: store.StateFailed, Outcome: store.OutcomeDeclined, Refunded: 0, Currency: "EUR"},
			"child_run_id currency order_id outcome refunded state"),
	}
}

// TestEvents_RoundTrip: every event type's payload, appended through
// EventOf and read back from PostgreSQL through PayloadOf, is the payload
// written, under the JSON keys events had before they had types.
func TestEvents_RoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	run := f.start(t, "vocabulary", 1)
	samples := eventSamples()
	covered := map[string]bool{}
	evs := make([]store.NewEvent, len(samples))
	for i, s := range samples {
		evs[i] = store.EventOf(s.want)
		covered[s.want.EventType()] = true
	}
	for _, typ := range store.EventTypes() {
		if !covered[typ] {
			t.Errorf("no sample of %s", typ)
		}
	}
	written, err := f.s.Append(ctx, run.ID, evs...)
	if err != nil {
		t.Fatal(err)
	}
	read, err := f.s.EventsAfter(ctx, run.ID, written[0].Seq-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(samples) {
		t.Fatalf("read %d events, want %d", len(read), len(samples))
	}
	for i, s := range samples {
		ev := read[i]
		t.Run(ev.Type, func(t *testing.T) {
			if got, want := ev.Type, s.want.EventType(); got != want {
				t.Errorf("type = %s, want %s", got, want)
			}
			if got, want := ev.Class, store.ClassOf(ev.Type); got != want {
				t.Errorf("class = %s, want %s", got, want)
			}
			got, err := s.read(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, s.want) {
				t.Errorf("payload = %+v, want %+v", got, s.want)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(ev.Payload, &fields); err != nil {
				t.Fatal(err)
			}
			keys := slices.Sorted(maps.Keys(fields))
			if got, want := strings.Join(keys, " "), s.keys; got != want {
				t.Errorf("keys = %q, want %q (payload %s)", got, want, ev.Payload)
			}
		})
	}
}

// TestPayloadOf_WrongType: reading an event as another type's payload is
// an error, and the zero payload.
func TestPayloadOf_WrongType(t *testing.T) {
	t.Parallel()
	ev := store.Event{Seq: 4, Type: store.EventNarrationDelta, Payload: json.RawMessage(`{"text":"hi"}`)}
	if p, err := store.PayloadOf[store.MessageFinal](ev); err == nil || p.Body != "" || p.In != nil {
		t.Errorf("PayloadOf[MessageFinal](narration) = %+v, %v; want an error", p, err)
	}
	ev = store.Event{Seq: 5, Type: store.EventApprovalGranted, Payload: json.RawMessage(`{"by":"someone"}`)}
	if p, err := store.PayloadOf[store.ApprovalGranted](ev); err == nil || p != (store.ApprovalGranted{}) {
		t.Errorf("PayloadOf[ApprovalGranted](by someone) = %+v, %v; want an error", p, err)
	}
}

// TestAppend_EventWithoutPayload: the zero NewEvent is refused, not
// written as an event with no type.
func TestAppend_EventWithoutPayload(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.start(t, "empty", 1)
	if _, err := f.s.Append(context.Background(), run.ID, store.NewEvent{}); err == nil {
		t.Error("appending the zero NewEvent succeeded")
	}
}

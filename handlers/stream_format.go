package handlers

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// streamFormat renders what a stream sends.
type streamFormat interface {
	// event renders one event for a viewer with the view v (already moved
	// past ev); nil data sends nothing.
	event(ctx context.Context, v *views.RunView, ev store.Event) (name string, data []byte, err error)
	reset(ctx context.Context, v *views.RunView, snap *store.Snapshot, access Access, banner bool) ([]byte, error)
	closing(ctx context.Context, r closeReason) ([]byte, error)
	// answersDenialInStream: a browser's stream must end a denial with the
	// close event (any error status makes the SSE extension retry forever);
	// a program gets the plain 404.
	answersDenialInStream() bool
	// rendersPage: the format renders the run page's parts, which need the
	// snapshot's head (approval, ledger, marks) to start a resumed stream.
	rendersPage() bool
}

var (
	_ streamFormat = htmlStream{}
	_ streamFormat = jsonStream{}
)

// htmlStream sends the run page's own components as out-of-band swaps.
type htmlStream struct{}

func (htmlStream) answersDenialInStream() bool { return true }
func (htmlStream) rendersPage() bool           { return true }

func (htmlStream) event(ctx context.Context, v *views.RunView, ev store.Event) (string, []byte, error) {
	if ev.Type == store.EventNarrationDelta && !v.Full {
		return "", nil, nil
	}
	var buf bytes.Buffer
	if err := views.StreamEvent(v, ev).Render(ctx, &buf); err != nil {
		return "", nil, err
	}
	return "", buf.Bytes(), nil
}

func (htmlStream) reset(ctx context.Context, v *views.RunView, _ *store.Snapshot, _ Access, banner bool) ([]byte, error) {
	var buf bytes.Buffer
	err := views.StreamReset(v, banner).Render(ctx, &buf)
	return buf.Bytes(), err
}

func (htmlStream) closing(ctx context.Context, r closeReason) ([]byte, error) {
	var buf bytes.Buffer
	err := views.StreamClose(r.message(), r != closeFinished).Render(ctx, &buf)
	return buf.Bytes(), err
}

// jsonStream sends the event JSON of DESIGN.md; a status-only viewer gets
// event: status with the run's state and final message instead.
type jsonStream struct{}

func (jsonStream) answersDenialInStream() bool { return false }
func (jsonStream) rendersPage() bool           { return false }

func (jsonStream) event(_ context.Context, v *views.RunView, ev store.Event) (string, []byte, error) {
	if v.Full {
		b, err := json.Marshal(ev)
		return "", b, err
	}
	if ev.Type == store.EventNarrationDelta {
		return "", nil, nil
	}
	var final *string
	if v.FinalMessage != "" {
		final = &v.FinalMessage
	}
	b, err := json.Marshal(apiStatusSnapshot{Access: "status", Run: apiStatusOfRun{ID: v.Run.ID, State: v.State}, FinalMessage: final})
	return "status", b, err
}

func (jsonStream) reset(_ context.Context, _ *views.RunView, snap *store.Snapshot, access Access, _ bool) ([]byte, error) {
	return json.Marshal(newAPISnapshot(snap, access))
}

func (jsonStream) closing(_ context.Context, r closeReason) ([]byte, error) {
	return json.Marshal(map[string]string{"reason": r.String(), "message": r.message()})
}

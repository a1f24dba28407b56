package outbound_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
)

// TestEngine_StopIsBounded: Stop returns within Timeout even while a
// receiver hangs, and the abandoned attempt is recorded; a sink is started
// and stopped with the engine. Stop is safe to call twice.
func TestEngine_StopIsBounded(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	rcv.behave = func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		select {
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
		}
		return true
	}
	ep, _ := mustEndpoint(t, st, rcv.URL(), store.EventRunCreated)
	sink := &blockingSink{}
	e := outbound.New(outbound.Config{Policy: loopback, Poll: 20 * time.Millisecond, Timeout: time.Second,
		Sinks: []outbound.Sink{sink}}, st, newLogger(t.Output()))
	e.Start(context.Background())
	newRunMaker(t, st).single(t)
	waitFor(t, 5*time.Second, "the hanging receiver sent to", func() bool { return rcv.count() > 0 })
	if !sink.running.Load() {
		t.Error("the sink is not running")
	}
	start := time.Now()
	e.Stop()
	e.Stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stop took %v with a receiver hanging, want within Timeout (1 s) and the record", took)
	}
	if sink.running.Load() {
		t.Error("the sink still runs after Stop")
	}
	if rows := attemptsOf(t, st, ep.ID); len(rows) != 1 || rows[0].Status != nil {
		t.Errorf("attempts after Stop: %+v, want the abandoned one recorded", rows)
	}
}

type blockingSink struct{ running atomic.Bool }

func (s *blockingSink) Run(ctx context.Context) {
	s.running.Store(true)
	<-ctx.Done()
	s.running.Store(false)
}

// TestEngine_FailingEndpointDisabledThenResumed: an endpoint failing for
// DisableAfter is disabled as failing; once an admin enables it, delivery
// goes on from where it stopped, per run in order, nothing skipped.
func TestEngine_FailingEndpointDisabledThenResumed(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	var down atomic.Bool
	down.Store(true)
	rcv.behave = func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		if down.Load() {
			w.WriteHeader(http.StatusBadGateway)
		}
		return down.Load()
	}
	ep, secret := mustEndpoint(t, st, rcv.URL())
	rcv.secrets = []string{secret}
	startEngine(t, st, outbound.Config{DisableAfter: 300 * time.Millisecond})
	m := newRunMaker(t, st)
	runs := m.many(t, 3)
	waitFor(t, 10*time.Second, "the failing endpoint disabled", func() bool {
		got, err := st.Webhook(context.Background(), ep.ID)
		return err == nil && got.DisabledAt.Valid
	})
	if got, _ := st.Webhook(context.Background(), ep.ID); got.DisabledReason.String != store.WebhookFailing {
		t.Errorf("disabled because %q, want %q", got.DisabledReason.String, store.WebhookFailing)
	}
	runs = append(runs, m.single(t)) // committed while it is disabled
	down.Store(false)
	if err := st.EnableWebhook(context.Background(), ep.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	want := businessEvents(t, st, runs)
	allDelivered(t, st, ep.ID, total(want), 10*time.Second)
	rcv.wantAll(t, want)
}

// TestEngine_LagGauge: each endpoint's lag is the age of its oldest event
// not yet acknowledged; an endpoint deleted loses its series.
func TestEngine_LagGauge(t *testing.T) {
	t.Parallel()
	st := storetest.MustOpen(t)
	rcv := newReceiver(t)
	rcv.behave = func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return true
	}
	ep, _ := mustEndpoint(t, st, rcv.URL())
	newRunMaker(t, st).single(t)
	if _, err := st.FanOut(context.Background(), 100, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.DB(t, st).Exec(`UPDATE webhook_deliveries SET event_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	startEngine(t, st, outbound.Config{})
	waitFor(t, 5*time.Second, "the lag gauge set", func() bool {
		lag, ok := lagOf(t, ep.ID.String())
		return ok && lag >= 3600 && lag < 3700
	})
	if err := st.DeleteWebhook(context.Background(), ep.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the deleted endpoint's series removed", func() bool {
		_, ok := lagOf(t, ep.ID.String())
		return !ok
	})
}

// lagOf reads refundd_webhook_lag_seconds{endpoint}, if there is one.
func lagOf(t testing.TB, endpoint string) (float64, bool) {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() {
		metrics.WebhookLag.Collect(ch)
		close(ch)
	}()
	lag, found := 0.0, false
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "endpoint" && l.GetValue() == endpoint {
				lag, found = pb.GetGauge().GetValue(), true
			}
		}
	}
	return lag, found
}

package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Faults are the simulated provider's fault injection settings. The zero
// value is a healthy provider. They are set at construction (NewSim), with
// Sim.SetFaults, or over HTTP with PUT /admin/faults, which replaces the
// whole set. Counters ("next N") count down as they fire.
//
// The order inside POST /refunds is: validation (400), injected 503s
// (Error5xxNext, Error5xxRate, FailBeforeCommit), in-flight check (409),
// replay of a committed key (200 or 422), Latency, commit, then
// CommitThenDrop or HoldAfterCommit, then 201.
type Faults struct {
	// Latency delays every new refund before it commits. The key is in
	// flight (409) meanwhile, and a caller that gives up leaves nothing
	// committed.
	Latency time.Duration
	// FailBeforeCommit makes every refund answer 503 without committing.
	FailBeforeCommit bool
	// Error5xxNext makes the next N refunds answer 503 without committing.
	Error5xxNext int
	// Error5xxRate makes this fraction (0..1) of refunds answer 503 without
	// committing.
	Error5xxRate float64
	// CommitThenDrop commits the refund, then never answers: the connection
	// is closed after DropAfter, or when the caller gives up if DropAfter
	// is zero. The caller cannot know the refund happened.
	CommitThenDrop bool
	DropAfter      time.Duration
	// HoldAfterCommit commits the refund, then holds the answer until it is
	// released (Sim.Release, POST /admin/release, or turning this off) or
	// the caller gives up. GET /refunds/{key} already shows the commit, so a
	// test can wait for it and then kill the caller.
	HoldAfterCommit bool
	// DeclineNext commits the next N refunds as failed ("declined"): a
	// final answer, unlike every fault above.
	DeclineNext int
	// LookupError5xxNext makes the next N lookups answer 503.
	LookupError5xxNext int
}

// faultsJSON is the wire form: durations as Go duration strings ("250ms").
type faultsJSON struct {
	Latency            string  `json:"latency"`
	FailBeforeCommit   bool    `json:"fail_before_commit"`
	Error5xxNext       int     `json:"error_5xx_next"`
	Error5xxRate       float64 `json:"error_5xx_rate"`
	CommitThenDrop     bool    `json:"commit_then_drop"`
	DropAfter          string  `json:"drop_after"`
	HoldAfterCommit    bool    `json:"hold_after_commit"`
	DeclineNext        int     `json:"decline_next"`
	LookupError5xxNext int     `json:"lookup_error_5xx_next"`
}

// MarshalJSON writes durations as strings such as "1.5s".
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Latency:            f.Latency.String(),
		FailBeforeCommit:   f.FailBeforeCommit,
		Error5xxNext:       f.Error5xxNext,
		Error5xxRate:       f.Error5xxRate,
		CommitThenDrop:     f.CommitThenDrop,
		DropAfter:          f.DropAfter.String(),
		HoldAfterCommit:    f.HoldAfterCommit,
		DeclineNext:        f.DeclineNext,
		LookupError5xxNext: f.LookupError5xxNext,
	})
}

// UnmarshalJSON reads durations as strings ("250ms"); a missing field is
// its zero value.
func (f *Faults) UnmarshalJSON(b []byte) error {
	// Strict, so a misspelt setting is an error rather than a fault that
	// silently never fires.
	var w faultsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	lat, err := parseDuration("latency", w.Latency)
	if err != nil {
		return err
	}
	drop, err := parseDuration("drop_after", w.DropAfter)
	if err != nil {
		return err
	}
	*f = Faults{
		Latency:            lat,
		FailBeforeCommit:   w.FailBeforeCommit,
		Error5xxNext:       w.Error5xxNext,
		Error5xxRate:       w.Error5xxRate,
		CommitThenDrop:     w.CommitThenDrop,
		DropAfter:          drop,
		HoldAfterCommit:    w.HoldAfterCommit,
		DeclineNext:        w.DeclineNext,
		LookupError5xxNext: w.LookupError5xxNext,
	}
	return nil
}

func parseDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration like \"250ms\"", name, s)
	}
	return d, nil
}

// Validate reports settings that make no sense.
func (f Faults) Validate() error {
	var errs []error
	if f.Latency < 0 {
		errs = append(errs, errors.New("latency must not be negative"))
	}
	if f.DropAfter < 0 {
		errs = append(errs, errors.New("drop_after must not be negative"))
	}
	if f.Error5xxNext < 0 || f.DeclineNext < 0 || f.LookupError5xxNext < 0 {
		errs = append(errs, errors.New("counts must not be negative"))
	}
	if f.Error5xxRate < 0 || f.Error5xxRate > 1 {
		errs = append(errs, errors.New("error_5xx_rate must be between 0 and 1"))
	}
	if f.CommitThenDrop && f.HoldAfterCommit {
		errs = append(errs, errors.New("commit_then_drop and hold_after_commit exclude each other"))
	}
	return errors.Join(errs...)
}

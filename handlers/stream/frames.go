package stream

import (
	"sync"

	"github.com/refundd/refundd/internal/metrics"
)

// Frames are one event's encodings, shared by every stream of the process
// that sends it: the run's tail makes one per event it reads (tail.go), and
// each stream asks it for its format's bytes (RunView.Event), so an event
// is encoded once per format whatever the number of watchers, and the same
// bytes go to all of them. A stream that reads the event itself (a replay)
// has none: a nil *Frames encodes every time.
type Frames struct {
	mu  sync.Mutex
	got []frame // one per key asked for: a format or two
}

type frame struct {
	key  string
	data []byte
	err  error
}

// Get returns the bytes made under key, encoding them on the first call.
// key must name everything the bytes depend on besides the event (the
// format, and what of the viewer shows in it). The bytes are shared: they
// are never written to.
func (f *Frames) Get(key string, encode func() ([]byte, error)) ([]byte, error) {
	if f == nil {
		metrics.StreamEncodes.Inc()
		return encode()
	}
	// Held while encoding: the other watchers wait for these bytes rather
	// than make their own.
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.got {
		if x.key == key {
			return x.data, x.err
		}
	}
	metrics.StreamEncodes.Inc()
	data, err := encode()
	f.got = append(f.got, frame{key, data, err})
	return data, err
}

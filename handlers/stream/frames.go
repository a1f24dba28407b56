package stream

import (
	"sync"
	"sync/atomic"

	"github.com/refundd/refundd/internal/metrics"
)

// Frames are one event's encodings, shared by every stream of the process
// that sends it: the run's tail makes one per event it reads (tail.go), and
// each stream asks it for its format's bytes (RunView.Event), so an event
// is encoded once per format whatever the number of watchers, and the same
// bytes go to all of them. A stream that reads the event itself (a replay)
// has none: a nil *Frames encodes every time.
//
// A thousand streams ask at once, as a fan-out wakes them: once a frame
// is made they read it without a lock, and those that came while it was
// being made wait for it together (a closed channel wakes them all at
// once), not one after another through a mutex.
type Frames struct {
	mu  sync.Mutex               // held only to add a frame
	got atomic.Pointer[[]*frame] // the frames asked for: a format or two
}

type frame struct {
	key  string
	made atomic.Bool   // data and err are set
	done chan struct{} // closed once made
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
	x := f.find(key)
	if x == nil {
		var mine bool
		if x, mine = f.add(key); mine {
			metrics.StreamEncodes.Inc()
			x.data, x.err = encode()
			x.made.Store(true)
			close(x.done)
		}
	}
	if !x.made.Load() {
		<-x.done
	}
	return x.data, x.err
}

func (f *Frames) find(key string) *frame {
	if got := f.got.Load(); got != nil {
		for _, x := range *got {
			if x.key == key {
				return x
			}
		}
	}
	return nil
}

// add returns key's frame, new (mine: the caller makes it) unless another
// caller added it first.
func (f *Frames) add(key string) (x *frame, mine bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if x := f.find(key); x != nil {
		return x, false
	}
	x = &frame{key: key, done: make(chan struct{})}
	var got []*frame
	if old := f.got.Load(); old != nil {
		got = append(got, *old...)
	}
	got = append(got, x)
	f.got.Store(&got)
	return x, true
}

package stream

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFrames_EncodesOncePerKeyForEveryCaller: a fan-out's thousand streams
// ask one event's frames at once, for two formats, while the first
// encodings are still being made: each format is encoded once, and every
// stream gets that encoding's bytes (or its error).
func TestFrames_EncodesOncePerKeyForEveryCaller(t *testing.T) {
	t.Parallel()
	var f Frames
	var encodes [2]atomic.Int32
	release := make(chan struct{})
	encode := func(k int) func() ([]byte, error) {
		return func() ([]byte, error) {
			encodes[k].Add(1)
			<-release // every caller arrives while the frame is being made
			if k == 1 {
				return nil, fmt.Errorf("format %d failed", k)
			}
			return []byte("bytes of format 0"), nil
		}
	}
	var wg, started sync.WaitGroup
	var wrong atomic.Int32
	for i := range 1000 {
		k := i % 2
		started.Add(1)
		wg.Go(func() {
			started.Done()
			data, err := f.Get(fmt.Sprint("format ", k), encode(k))
			if (k == 0 && (err != nil || string(data) != "bytes of format 0")) || (k == 1 && err == nil) {
				wrong.Add(1)
			}
		})
	}
	started.Wait() // every caller is on its way into Get before the encodings end
	close(release)
	wg.Wait()
	if n0, n1 := encodes[0].Load(), encodes[1].Load(); n0 != 1 || n1 != 1 {
		t.Errorf("encoded %d and %d times, want once per format", n0, n1)
	}
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d callers got other bytes than their format's encoding", n)
	}
}

package stream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/refundd/refundd/store"
)

// TestParseFamilyCursor: a family cursor has one part per run; an empty one
// (or a lone 0) starts every run from its first event; another shape is
// invalid as a whole, while a part that is no seq is left to its run,
// which alone starts over from a snapshot.
func TestParseFamilyCursor(t *testing.T) {
	tests := []struct {
		raw     string
		n       int
		want    []string
		invalid bool
	}{
		{"", 3, []string{"", "", ""}, false},
		{"0", 3, []string{"", "", ""}, false},
		{" 9.4.7 ", 3, []string{"9", "4", "7"}, false},
		{"9.x.7", 3, []string{"9", "x", "7"}, false},
		{"9.4", 3, nil, true},
		{"9.4.7.1", 3, nil, true},
		{"9..7.1", 3, nil, true},
		{"12", 2, nil, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q of %d", tc.raw, tc.n), func(t *testing.T) {
			got, err := ParseFamilyCursor(tc.raw, tc.n)
			if tc.invalid {
				if !errors.Is(err, store.ErrCursorInvalid) {
					t.Errorf("err = %v, want ErrCursorInvalid", err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

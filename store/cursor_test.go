package store_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/refundd/refundd/store"
)

func TestParseCursor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want int64
		ok   bool
	}{
		{"", 0, true},
		{"   ", 0, true},
		{"0", 0, true},
		{"42", 42, true},
		{" 42\t", 42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"-1", 0, false},
		{"-0", 0, false},
		{"+7", 0, false},
		{"007", 0, false},
		{"0x10", 0, false},
		{"1e3", 0, false},
		{"4 2", 0, false},
		{"abc", 0, false},
		{"x9", 0, false},
	} {
		t.Run(strconv.Quote(tc.raw), func(t *testing.T) {
			got, err := store.ParseCursor(tc.raw)
			if tc.ok {
				if err != nil || got != tc.want {
					t.Errorf("ParseCursor(%q) = %d, %v; want %d, nil", tc.raw, got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, store.ErrCursorInvalid) {
				t.Errorf("ParseCursor(%q) = %d, %v; want ErrCursorInvalid", tc.raw, got, err)
			}
		})
	}
}

// FuzzParseCursor holds ParseCursor to its rule: exactly the canonical
// spelling of a non-negative int64, spaces around it ignored, "" is 0.
func FuzzParseCursor(f *testing.F) {
	for _, seed := range []string{"", "0", "17", " 17 ", "-3", "+3", "007", "9223372036854775807",
		"9223372036854775808", "1.5", "\u00a05", "١٢"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := store.ParseCursor(raw)
		s := strings.TrimSpace(raw)
		switch {
		case s == "":
			if err != nil || got != 0 {
				t.Fatalf("ParseCursor(%q) = %d, %v; want 0, nil", raw, got, err)
			}
		case canonicalSeq(s):
			if err != nil || strconv.FormatInt(got, 10) != s {
				t.Fatalf("ParseCursor(%q) = %d, %v; want %s, nil", raw, got, err, s)
			}
		default:
			if !errors.Is(err, store.ErrCursorInvalid) || got != 0 {
				t.Fatalf("ParseCursor(%q) = %d, %v; want 0, ErrCursorInvalid", raw, got, err)
			}
		}
	})
}

// canonicalSeq is the rule spelled out by hand, apart from strconv: ASCII
// digits, no leading zero, at most the largest int64.
func canonicalSeq(s string) bool {
	const maxInt64 = "9223372036854775807"
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(s) < len(maxInt64) || (len(s) == len(maxInt64) && s <= maxInt64)
}

func TestRun_CheckCursor(t *testing.T) {
	t.Parallel()
	// Events 1..10 and 1011..1012, of which 1..4 were pruned; a restart
	// skipped 11..1010.
	run := &store.Run{LastSeq: 1012, ReplayFloor: 4, SeqGaps: []int64{10}}
	for _, tc := range []struct {
		name   string
		cursor int64
		want   error
	}{
		{"at the floor", 4, nil},
		{"inside the log", 7, nil},
		{"before the restart's skip", 10, nil},
		{"inside the skip: narration the crash lost", 11, store.ErrCursorInvalid},
		{"at the skip's end", 1010, store.ErrCursorInvalid},
		{"after the skip", 1011, nil},
		{"at the end", 1012, nil},
		{"below the floor", 3, store.ErrCursorExpired},
		{"from the start", 0, store.ErrCursorExpired},
		{"from the future", 1013, store.ErrCursorInvalid},
		{"negative", -1, store.ErrCursorInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run.CheckCursor(tc.cursor)
			if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("CheckCursor(%d) = %v, want %v", tc.cursor, err, tc.want)
			}
		})
	}
}

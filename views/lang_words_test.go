package views

import (
	"testing"

	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// TestLang_WordsKeptAreTheCatalogues: T answers a key without data from
// what it kept, the same words the catalogue gives; a key with data is
// filled in each time, and a key no catalogue holds is answered with the
// key and never kept, so what is kept stays within the catalogues.
func TestLang_WordsKeptAreTheCatalogues(t *testing.T) {
	zh := Catalogues.Lang(language.MustParse("zh-CN"))
	kept := func() int {
		n := 0
		zh.words.Range(func(any, any) bool { n++; return true })
		return n
	}
	const key = "language.name"
	want, err := zh.localize(&i18n.LocalizeConfig{MessageID: key})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := zh.T(key); got != want {
			t.Fatalf("T(%q) = %q, want the catalogue's %q", key, got, want)
		}
	}
	if w, ok := zh.words.Load(key); !ok || w != want {
		t.Errorf("kept for %q: %v %v, want %q", key, w, ok, want)
	}
	before := kept()
	for range 100 {
		if got := zh.T("no.such.key"); got != "no.such.key" {
			t.Fatalf("an unknown key: %q, want the key", got)
		}
	}
	if n := kept(); n != before {
		t.Errorf("%d words kept after unknown keys, want %d", n, before)
	}
	made := Catalogues.Lang(language.MustParse("fr"))
	if made.words != nil {
		t.Errorf("a language made on the fly keeps words: %v", made.words)
	}
}

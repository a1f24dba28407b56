package views_test

import (
	"io/fs"
	"maps"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/BurntSushi/toml"
	"golang.org/x/text/language"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// catalogue reads a catalogue file's keys and words.
func catalogue(t *testing.T, fsys fs.FS, name string) map[string]string {
	t.Helper()
	buf, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]string{}
	if err := toml.Unmarshal(buf, &words); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return words
}

// TestCatalogues_EveryKeyInEveryLanguage: each catalogue holds exactly
// English's keys, each with words: a key missing in one language fails
// here, not on a page.
func TestCatalogues_EveryKeyInEveryLanguage(t *testing.T) {
	files := views.LocaleFiles()
	en := catalogue(t, files, "locales/en.toml")
	names, _ := fs.Glob(files, "locales/*.toml")
	if len(names) < 2 {
		t.Fatalf("catalogues: %v, want English and at least one more", names)
	}
	for _, name := range names {
		words := catalogue(t, files, name)
		for _, k := range slices.Sorted(maps.Keys(en)) {
			if words[k] == "" {
				t.Errorf("%s: no words for %q", name, k)
			}
		}
		for k := range words {
			if _, ok := en[k]; !ok {
				t.Errorf("%s: %q is not an English key", name, k)
			}
		}
	}
}

// TestLanguages_Choose: a saved choice first, then the browser's
// Accept-Language, then English.
func TestLanguages_Choose(t *testing.T) {
	zh := language.MustParse("zh-CN")
	for _, c := range []struct {
		saved, accept string
		want          language.Tag
	}{
		{"", "", language.English},
		{"", "zh-CN,zh;q=0.9,en;q=0.8", zh},
		{"", "zh", zh},
		{"", "zh-Hans-CN", zh},
		{"", "fr-FR,fr;q=0.9", language.English},
		{"", "fr-FR,zh-CN;q=0.5", zh},
		{"", "not a header;;q=", language.English},
		{"en", "zh-CN", language.English},
		{"zh-CN", "en-US", zh},
		{"xx-nope", "zh-CN", zh},
		{"de", "", language.English},
	} {
		if got := views.Catalogues.Choose(c.saved, c.accept); got.Tag != c.want {
			t.Errorf("Choose(%q, %q) = %v, want %v", c.saved, c.accept, got.Tag, c.want)
		}
	}
	if got := views.Catalogues.Choose("", "zh-CN").T("layout.logout"); got != "退出登录" {
		t.Errorf("zh-CN's log out: %q", got)
	}
}

// TestLanguages_ThirdLanguageIsOneFile: a catalogue file beside the
// others is a language the viewers can choose, with nothing else added.
func TestLanguages_ThirdLanguageIsOneFile(t *testing.T) {
	files := views.LocaleFiles()
	fsys := fstest.MapFS{}
	en := catalogue(t, files, "locales/en.toml")
	names, _ := fs.Glob(files, "locales/*.toml")
	for _, name := range names {
		buf, _ := fs.ReadFile(files, name)
		fsys[name] = &fstest.MapFile{Data: buf}
	}
	fr := ""
	for _, k := range slices.Sorted(maps.Keys(en)) {
		fr += "\"" + k + "\" = \"fr: " + en[k] + "\"\n"
	}
	fsys["locales/fr.toml"] = &fstest.MapFile{Data: []byte(fr)}
	langs, err := views.LoadLanguages(fsys, "locales")
	if err != nil {
		t.Fatal(err)
	}
	l := langs.Choose("", "fr-CA,en;q=0.5")
	if l.Tag != language.French || l.T("layout.logout") != "fr: Log out" {
		t.Errorf("with fr.toml added: chose %v, log out %q", l.Tag, l.T("layout.logout"))
	}
	if l := langs.Choose("", "zh-CN"); l.T("layout.logout") != "退出登录" {
		t.Errorf("zh-CN beside fr: %q", l.T("layout.logout"))
	}
}

// TestWords_StatusInTheViewersLanguage: the status words of the states
// the seed names are its own in Chinese, and unchanged in English.
func TestWords_StatusInTheViewersLanguage(t *testing.T) {
	zh := views.Catalogues.Choose("zh-CN", "")
	run := &store.Run{Amount: 29900, Currency: "CNY"}
	for _, c := range []struct {
		state  string
		ops    []store.Operation
		en, zh string
	}{
		{store.StateSubmitting, nil, "Sending to the payment provider", "正在提交退款"},
		{store.StateReconciling, nil, "Verifying the result", "结果正在核对"},
		{store.StateCompleted, []store.Operation{{State: store.OpSucceeded}}, "Refunded", "已退款"},
		{store.StateAwaitingApproval, nil, "Waiting for an approver", "等待审批人审批"},
	} {
		p := &store.Progress{Run: run, State: c.state, Operations: c.ops}
		if got := views.Words(p, views.Viewer{}).Status; got != c.en {
			t.Errorf("%s in English: %q, want %q", c.state, got, c.en)
		}
		if got := views.Words(p, views.Viewer{Lang: zh}).Status; got != c.zh {
			t.Errorf("%s in Chinese: %q, want %q", c.state, got, c.zh)
		}
	}
}

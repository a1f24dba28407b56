package handlers_test

import (
	"context"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/views"
)

// englishWords are the words table's English that a page in Chinese must
// not show: the literal parts of each English catalogue entry (between its
// {{…}} blanks) that its Chinese entry does not also hold, as patterns
// matching whole words. Parts of one word are checked when they are a
// label's (capitalised, six letters or more): shorter or lower-case ones
// match names and what people wrote as often as a leftover label.
var englishWords = sync.OnceValues(func() ([]*regexp.Regexp, error) {
	all := map[string]map[string]string{}
	names, err := fs.Glob(views.LocaleFiles(), "locales/*.toml")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		buf, err := fs.ReadFile(views.LocaleFiles(), name)
		if err != nil {
			return nil, err
		}
		raw := map[string]any{}
		if err := toml.Unmarshal(buf, &raw); err != nil {
			return nil, err
		}
		base := strings.TrimSuffix(path.Base(name), ".toml")
		tag := base[strings.LastIndex(base, ".")+1:]
		if all[tag] == nil {
			all[tag] = map[string]string{}
		}
		for k, v := range raw {
			switch v := v.(type) {
			case string:
				all[tag][k] = v
			case map[string]any: // plural forms: every one of them
				for form, s := range v {
					if s, ok := s.(string); ok {
						all[tag][k+"."+form] = s
					}
				}
			}
		}
	}
	blank, word := regexp.MustCompile(`\{\{[^}]*\}\}`), regexp.MustCompile(`[A-Za-z]{3}`)
	seen := map[string]bool{}
	var out []*regexp.Regexp
	for k, en := range all["en"] {
		zh := all["zh-CN"][k]
		if zh == "" {
			zh = all["zh-CN"][strings.TrimSuffix(strings.TrimSuffix(k, ".one"), ".other")+".other"]
		}
		for _, part := range blank.Split(en, -1) {
			part = strings.Trim(part, " .,:;!?()“”\"'—–-…#")
			words := strings.Fields(part)
			// One word is a label's ("Status") or a name's (run.created,
			// SMTP_URL); lower case, it is as likely what a person or the
			// provider wrote ("declined by the card issuer").
			if len(words) == 0 || len(words) == 1 && (len(part) < 6 || strings.ContainsAny(part, "._") || unicode.IsLower(rune(part[0]))) ||
				len(words) > 1 && len(part) < 10 || // "of the
				strings.Contains(zh, part) || seen[part] || !word.MatchString(part) {
				continue
			}
			seen[part] = true
			out = append(out, regexp.MustCompile(`(^|[^A-Za-z])`+regexp.QuoteMeta(part)+`($|[^A-Za-z])`))
		}
	}
	slices.SortFunc(out, func(a, b *regexp.Regexp) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
})

// shownTextJS is what a page says in the words table's voice: its text
// without what people, programs and the agent wrote (the agent's
// narration, what a page quotes, a provider's answer as recorded, e-mail
// addresses).
const shownTextJS = `(() => {
	const c = document.body.cloneNode(true);
	c.querySelectorAll('script, style, template, .narration, #narration, q, samp, .lang-picker option').forEach(e => e.remove());
	return c.innerText.replace(/[\w.+-]+@[\w.-]+/g, ' ');
})()`

// wantNoEnglish fails the test for each English word of the words table
// on the page ctx shows (what names it in the failure).
func wantNoEnglish(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](shownTextJS))
	if err != nil {
		t.Fatal(err)
	}
	wantNoEnglishIn(t, what, text)
}

func wantNoEnglishIn(t *testing.T, what, text string) {
	t.Helper()
	for _, u := range devdb.DemoUsers { // names are people's, not the words table's
		text = strings.ReplaceAll(text, u.Name, " ")
	}
	pats, err := englishWords()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pats {
		if m := p.FindString(text); m != "" {
			left = append(left, strings.TrimSpace(m))
		}
	}
	if len(left) > 0 {
		t.Errorf("%s in Chinese still says, in English: %q\npage text:\n%s", what, left, text)
	}
}

// TestEnglishWords_FindsLeftovers: the check finds a leftover label and
// passes the Chinese words, so the browser tests' checks can fail.
func TestEnglishWords_FindsLeftovers(t *testing.T) {
	t.Parallel()
	pats, err := englishWords()
	if err != nil || len(pats) < 100 {
		t.Fatalf("%d English words, %v; want the words table's", len(pats), err)
	}
	zh := views.Catalogues.Choose("zh-CN", "")
	clean := zh.T("status.submitting") + " " + zh.T("next.submitting") + " " + zh.Money(29900, "CNY")
	found := func(text string) bool {
		for _, p := range pats {
			if p.MatchString(text) {
				return true
			}
		}
		return false
	}
	if found(clean) {
		t.Errorf("Chinese words %q read as English", clean)
	}
	for _, s := range []string{views.English.T("status.submitting"), "x " + views.English.T("next.reconciling")} {
		if !found(clean + " " + s) {
			t.Errorf("%q beside Chinese not found", s)
		}
	}
}

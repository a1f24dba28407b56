package views_test

import (
	"database/sql"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
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
	raw := map[string]any{}
	if err := toml.Unmarshal(buf, &raw); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// A plural message is a table of CLDR forms; every language has
	// "other" (Chinese has nothing else), so a table's words are its other.
	words := map[string]string{}
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			words[k] = v
		case map[string]any:
			words[k], _ = v["other"].(string)
		default:
			t.Errorf("%s: %q is a %T, want words or a table of plural forms", name, k, v)
		}
	}
	return words
}

// catalogues are every language's words, by the tag its file names
// ("en" for en.toml).
func catalogues(t *testing.T, fsys fs.FS) map[string]map[string]string {
	t.Helper()
	names, _ := fs.Glob(fsys, "locales/*.toml")
	all := map[string]map[string]string{}
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".toml")
		tag := base[strings.LastIndex(base, ".")+1:]
		if all[tag] == nil {
			all[tag] = map[string]string{}
		}
		for k, v := range catalogue(t, fsys, name) {
			if _, dup := all[tag][k]; dup {
				t.Errorf("%s: %q is said twice in %s", name, k, tag)
			}
			all[tag][k] = v
		}
	}
	return all
}

// TestCatalogues_EveryKeyInEveryLanguage: each catalogue holds exactly
// English's keys, each with words: a key missing in one language fails
// here, not on a page.
func TestCatalogues_EveryKeyInEveryLanguage(t *testing.T) {
	all := catalogues(t, views.LocaleFiles())
	en := all["en"]
	if len(all) < 2 {
		t.Fatalf("catalogues: %v, want English and at least one more", slices.Sorted(maps.Keys(all)))
	}
	for name, words := range all {
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
	en := catalogues(t, files)["en"]
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

// TestWords_ProgressAndWhoInTheViewersLanguage: the progress line, what
// happens next, a pending cancel and who acted speak the viewer's
// language, staff reading the name beside the role in either.
func TestWords_ProgressAndWhoInTheViewersLanguage(t *testing.T) {
	zh := views.Catalogues.Choose("zh-CN", "")
	run := &store.Run{OwnerID: 7, Amount: 29900, Currency: "CNY"}
	approver := &store.Decider{UserID: 9, Role: store.RoleApprover, Name: "王芳"}
	p := &store.Progress{Run: run, State: store.StateSubmitting, ApprovalAsked: true, ApprovedBy: approver,
		CancelRequested: true, CanceledBy: &store.Decider{UserID: 7, Role: store.RoleCustomer}}
	customer := views.Words(p, views.Viewer{UserID: 7, Lang: zh})
	if got, want := customer.Pending, "您已申请取消：代理会在任何资金变动之前停止。"; got != want {
		t.Errorf("the customer's pending cancel in Chinese: %q, want %q", got, want)
	}
	var labels []string
	for _, s := range customer.Steps {
		labels = append(labels, s.Label)
	}
	if want := []string{"已申请", "订单已核查", "已批准", "正在提交退款", "结果"}; !slices.Equal(labels, want) {
		t.Errorf("progress line in Chinese: %v, want %v", labels, want)
	}
	staff := views.Words(p, views.Viewer{UserID: 3, Staff: true, Lang: zh})
	if got, want := staff.Approved, "已由王芳（审批人）批准。"; got != want {
		t.Errorf("staff's approval line in Chinese: %q, want %q", got, want)
	}
	if got, want := views.Words(p, views.Viewer{UserID: 3, Staff: true}).Approved, "Approved by 王芳 (approver)."; got != want {
		t.Errorf("staff's approval line in English: %q, want %q", got, want)
	}
	p.CancelRequested = false
	if got, want := views.Words(p, views.Viewer{Lang: zh}).Next, "下一步：支付服务商答复后，结果会显示在这里。"; got != want {
		t.Errorf("next in Chinese: %q, want %q", got, want)
	}
}

// TestWords_OutcomeInTheViewersLanguage: how a run ended reads in the
// viewer's language, the provider's reference and whose payment method
// it goes back to included.
func TestWords_OutcomeInTheViewersLanguage(t *testing.T) {
	zh := views.Catalogues.Choose("zh-CN", "")
	run := &store.Run{OwnerID: 7, Amount: 29900, Currency: "CNY"}
	p := &store.Progress{Run: run, State: store.StateCompleted, Operations: []store.Operation{{State: store.OpSucceeded,
		Amount: 29900, Currency: "CNY", ProviderRef: sql.NullString{String: "re_1", Valid: true}}}}
	w := views.Words(p, views.Viewer{UserID: 7, Lang: zh})
	if want := "已退款 299 元。"; w.Outcome != want {
		t.Errorf("outcome in Chinese: %q, want %q", w.Outcome, want)
	}
	if want := "支付服务商已确认这笔退款（参考号 re_1）。款项将退回您的原支付方式。"; w.Detail != want {
		t.Errorf("detail in Chinese: %q, want %q", w.Detail, want)
	}
	en := views.Words(p, views.Viewer{UserID: 8})
	if want := "The payment provider confirmed it (reference re_1). It goes back to the customer's original payment method."; en.Detail != want {
		t.Errorf("detail in English: %q, want %q", en.Detail, want)
	}
	p.State, p.Operations = store.StateFailed, []store.Operation{{State: store.OpFailed, LastError: "card expired"}}
	if got := views.Words(p, views.Viewer{Lang: zh}); got.Outcome != "支付服务商拒绝了这笔退款。" || got.Status != "已被拒绝" {
		t.Errorf("declined in Chinese: %q / %q", got.Status, got.Outcome)
	}
}

// TestListWords_RequestInTheViewersLanguage: a request of several orders
// reads, in lists and on its page alike, in the viewer's language.
func TestListWords_RequestInTheViewersLanguage(t *testing.T) {
	zh := views.Catalogues.Choose("zh-CN", "")
	r := store.RunListing{Run: store.Run{Kind: store.KindRequest, State: store.StatePlanning}, Children: 3, ChildrenEnded: 1}
	if got, _ := views.ListWords(r, zh); got != "3 笔退款中已结束 1 笔" {
		t.Errorf("going in Chinese: %q", got)
	}
	if got, _ := views.ListWords(r, views.English); got != "1 of 3 refunds ended" {
		t.Errorf("going in English: %q", got)
	}
	r.State, r.ChildrenEnded, r.ChildrenRefunded = store.StateCompleted, 3, 2
	if got, _ := views.ListWords(r, zh); got != "部分退款（3 笔中 2 笔）" {
		t.Errorf("partly in Chinese: %q", got)
	}
}

// TestMoney_InTheViewersLanguage: amounts as each language writes them,
// the seed's "299 元" in Chinese, English as it always was.
func TestMoney_InTheViewersLanguage(t *testing.T) {
	zh := views.Catalogues.Choose("zh-CN", "")
	for _, c := range []struct {
		minor    int64
		currency string
		en, zh   string
	}{
		{29900, "CNY", "299.00 CNY", "299 元"},
		{29950, "CNY", "299.50 CNY", "299.50 元"},
		{129900, "EUR", "€1,299.00", "€1,299.00"},
		{500, "JPY", "¥500", "JP¥500"},
		{500, "CHF", "5.00 CHF", "5.00 CHF"},
		{-123456789, "USD", "-$1,234,567.89", "-US$1,234,567.89"},
		{-1 << 63, "EUR", "-€92,233,720,368,547,758.08", "-€92,233,720,368,547,758.08"},
	} {
		if got := views.English.Money(c.minor, c.currency); got != c.en {
			t.Errorf("English %d %s: %q, want %q", c.minor, c.currency, got, c.en)
		}
		if got := zh.Money(c.minor, c.currency); got != c.zh {
			t.Errorf("Chinese %d %s: %q, want %q", c.minor, c.currency, got, c.zh)
		}
	}
}

// catalogueOf is the words of tag whose keys begin with one of prefixes
// ("queue." say): one area's words, for tests that look for them.
func catalogueOf(t *testing.T, tag string, prefixes ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range catalogues(t, views.LocaleFiles())[tag] {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s words under %v", tag, prefixes)
	}
	return out
}

package views_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

var chinese = views.Catalogues.Choose("zh-CN", "")

// TestRefusal_InTheViewersLanguage: a store refusal is its catalogue
// key's words in the viewer's language, a refusal within it and its
// amounts too; in English it is its Message, byte for byte.
func TestRefusal_InTheViewersLanguage(t *testing.T) {
	inner := store.Refuse(store.CodeInvalid, "refuse.amount_not_positive", nil)
	outer := store.Refuse(store.CodeInvalid, "refuse.refund_n", map[string]any{"N": 2, "Why": inner})
	if got, want := outer.Message, "refund 2: the amount must be more than zero"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := views.English.Refusal(outer); got != outer.Message {
		t.Errorf("English = %q, want the Message %q", got, outer.Message)
	}
	if got, want := chinese.Refusal(outer), "第 2 笔退款：金额必须大于零。"; got != want {
		t.Errorf("zh-CN = %q, want %q", got, want)
	}
	left := store.Refuse(store.CodeInvalid, "refuse.more_than_left", map[string]any{"Left": store.Amount{Minor: 29900, Currency: "CNY"}})
	if got, want := left.Message, "the amount is more than what is still refundable on this order ("+store.FormatMoney(29900, "CNY")+")"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got, want := chinese.Refusal(left), "金额超过了该订单的剩余可退金额（"+chinese.Money(29900, "CNY")+"）。"; got != want {
		t.Errorf("zh-CN = %q, want %q", got, want)
	}
	plain := store.Errorf(store.CodeInvalid, "no key: %d", 1)
	if got := chinese.Refusal(plain); got != "no key: 1" {
		t.Errorf("a refusal without a key = %q, want its message", got)
	}
}

// TestStartForm_InChinese: the start form's labels, hint and button in
// the viewer's language; the amount's placeholder with its decimal mark.
func TestStartForm_InChinese(t *testing.T) {
	orders := []store.Order{{ID: 3, Description: "Shoes", Amount: 12999, Currency: "EUR", Refundable: 12999}}
	render := func(l views.Lang) *goquery.Document {
		t.Helper()
		var b bytes.Buffer
		if err := views.RefundForm(orders, views.StartForm{RequestID: "r"}).Render(views.WithLang(context.Background(), l), &b); err != nil {
			t.Fatal(err)
		}
		d, err := goquery.NewDocumentFromReader(&b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		l                                   views.Lang
		title, legend, pick, amount, submit string
	}{
		{chinese, "申请退款", "要退款的订单", "#3 Shoes：可退 €129.99", "订单 #3 的退款金额", "申请退款"},
		{views.English, "Request a refund", "Orders to refund", "#3 Shoes: €129.99 refundable", "Amount for order #3", "Request refund"},
	} {
		d := render(tc.l)
		for sel, want := range map[string]string{"h2": tc.title, "legend": tc.legend, ".start-pick span": tc.pick,
			".start-amount span": tc.amount, "button": tc.submit} {
			if got := d.Find(sel).Text(); got != want {
				t.Errorf("%v: %s = %q, want %q", tc.l.Tag, sel, got, want)
			}
		}
		if got := d.Find(`input[name="amount_3"]`).AttrOr("placeholder", ""); got != "12.50" {
			t.Errorf("%v: placeholder = %q, want 12.50", tc.l.Tag, got)
		}
	}
}

// formKey is a catalogue key of the forms and refusals as Go source names it.
var formKey = regexp.MustCompile(`"((?:refuse|form|login|again|decision|api|error)\.[a-z0-9_]+(?:\.[a-z0-9_]+)*)"`)

// TestFormKeys_AreInTheCatalogue: every key of the forms and refusals that the
// handlers, the store and the views name is in the English catalogue; a
// misspelt key would show as itself.
func TestFormKeys_AreInTheCatalogue(t *testing.T) {
	en := catalogues(t, views.LocaleFiles())["en"]
	named := 0
	for _, dir := range []string{"../handlers", "../store", "."} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		templs, _ := filepath.Glob(filepath.Join(dir, "*.templ"))
		for _, f := range append(files, templs...) {
			if strings.HasSuffix(f, "_test.go") || strings.HasSuffix(f, "_templ.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range formKey.FindAllStringSubmatch(string(src), -1) {
				named++
				if _, ok := en[m[1]]; !ok {
					t.Errorf("%s names %q, which no English catalogue holds", f, m[1])
				}
			}
		}
	}
	if named < 100 {
		t.Errorf("found %d keys named in the source, want the forms' many", named)
	}
}

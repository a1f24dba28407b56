package handlers

import (
	"testing"

	"golang.org/x/text/language"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestParseAmount_ByLanguage: an amount is read with the marks of the
// language it was typed in: grouping and the decimal mark as CLDR has
// them; the other decimal mark where it cannot be grouping; and an amount
// that reads two ways is refused in words, not guessed at.
func TestParseAmount_ByLanguage(t *testing.T) {
	t.Parallel()
	zh := views.Catalogues.Choose("zh-CN", "")
	de := views.Catalogues.Lang(language.German) // no catalogue: CLDR's marks all the same
	for _, tc := range []struct {
		l      views.Lang
		in     string
		digits int
		want   int64
	}{
		{views.English, "1,299.50", 2, 129950},
		{views.English, "12,345,678.9", 2, 1234567890},
		{views.English, "12,50", 2, 1250},
		{views.English, "1,000", 0, 1000},
		{zh, "1,299.50", 2, 129950},
		{de, "1.299,50", 2, 129950},
		{de, "12,50", 2, 1250},
		{de, "12.50", 2, 1250},
		{de, "1.000", 2, 100000},
	} {
		got, err := parseAmount(tc.in, tc.digits, tc.l)
		if err != nil || got != tc.want {
			t.Errorf("%v: parseAmount(%q, %d) = %d, %v; want %d", tc.l.Tag, tc.in, tc.digits, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		l      views.Lang
		in     string
		digits int
		says   string
	}{
		{views.English, "1,000", 3, `"1,000" can be read two ways: write 1000 for the whole number, or 1.000 with decimals.`},
		{de, "1.000", 3, `"1.000" can be read two ways: write 1000 for the whole number, or 1,000 with decimals.`},
		{zh, "1,000", 3, `"1,000" 有两种理解：如果是整数金额，请填写 1000；如果含小数，请填写 1.000。`},
		{views.English, "1,00.00", 2, "Enter the amount as a number, like 12.50 or 12,50."},
		{de, "1,2.3", 2, "Enter the amount as a number, like 12,50 or 12.50."},
		{zh, "abc", 2, "请填写数字金额，例如 12.50 或 12,50。"},
	} {
		got, err := parseAmount(tc.in, tc.digits, tc.l)
		if store.ErrorCode(err) != store.CodeInvalid || tc.l.Refusal(err) != tc.says {
			t.Errorf("%v: parseAmount(%q, %d) = %d, %v (%q); want it refused saying %q", tc.l.Tag, tc.in, tc.digits, got, err, tc.l.Refusal(err), tc.says)
		}
	}
}

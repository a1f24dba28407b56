package views

import (
	"errors"

	"golang.org/x/text/language"

	"github.com/refundd/refundd/store"
)

// The store's refusals name their words in the catalogues (store.Refuse)
// and carry them in English: store cannot import views, so views gives it
// the English catalogue as it loads.
func init() {
	store.SetEnglish(func(key string, data map[string]any) string { return English.T(key, data) })
}

// Refusal is err's words in l: a refusal made by store.Refuse in l's words
// (its Message, byte for byte, in English), any other error's message as
// it is.
func (l Lang) Refusal(err error) string {
	var e *store.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Key == "" || l.loc == nil || l.Tag == language.English {
		return e.Error()
	}
	return l.T(e.Key, l.refusalData(e.Data))
}

// refusalData is a refusal's data for l: refusals within it, and amounts in l, the rest as it prints.
func (l Lang) refusalData(data map[string]any) map[string]any {
	if len(data) == 0 {
		return data
	}
	out := make(map[string]any, len(data))
	for k, v := range data {
		switch v := v.(type) {
		case *store.Error:
			out[k] = l.Refusal(v)
		case store.Amount:
			out[k] = l.Money(v.Minor, v.Currency)
		default:
			out[k] = v
		}
	}
	return out
}

// Marks are the decimal and grouping marks l writes numbers with (CLDR):
// "." and "," in English and Chinese, "," and "." in German.
func (l Lang) Marks() (decimal, group string) {
	m := marksOf(l.Tag)
	return m.decimal, m.group
}

// formMoney is an amount as the start form shows it: FormatMoney's in
// English, as it always was; the language's own otherwise.
func (l Lang) formMoney(minor int64, currency string) string {
	if l.loc == nil || l.Tag == language.English {
		return store.FormatMoney(minor, currency)
	}
	return l.Money(minor, currency)
}

// amountPlaceholder is an example amount with l's decimal mark ("12.50").
func (l Lang) amountPlaceholder() string {
	dec, _ := l.Marks()
	return "12" + dec + "50"
}

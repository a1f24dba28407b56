package views

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/number"

	"github.com/refundd/refundd/store"
)

// separators are a language's thousands and decimal marks (CLDR, through
// x/text), read once per language.
type separators struct{ group, decimal string }

var marks sync.Map // language.Tag → separators

func marksOf(t language.Tag) separators {
	if s, ok := marks.Load(t); ok {
		return s.(separators)
	}
	// 1234.5 printed in t is "1,234.5" in English, "1.234,5" in German.
	shown := []rune(message.NewPrinter(t).Sprint(number.Decimal(1234.5, number.Scale(1))))
	s := separators{group: ",", decimal: "."}
	if len(shown) == 7 {
		s = separators{group: string(shown[1]), decimal: string(shown[5])}
	}
	marks.Store(t, s)
	return s
}

// Money is an amount in minor units as l writes it: the language's
// separators, the currency's symbol in the language (x/text/currency), and
// the catalogue's pattern ("money.symbol", "money.code", or the currency's
// own "money.CNY": the seed's "299 元"). Integer arithmetic only: no float
// ever touches an amount.
func (l Lang) Money(minor int64, cur string) string {
	if l.loc == nil {
		l = English
	}
	m := marksOf(l.Tag)
	sign := ""
	abs := uint64(minor)
	if minor < 0 { // uint64 so the most negative int64 still formats
		sign, abs = "-", uint64(-(minor+1))+1
	}
	digits := store.MinorDigits(cur)
	scale := uint64(1)
	for range digits {
		scale *= 10
	}
	whole := groupWith(strconv.FormatUint(abs/scale, 10), m.group)
	amount, short := whole, whole
	if digits > 0 {
		frac := strconv.FormatUint(abs%scale+scale, 10)[1:]
		amount += m.decimal + frac
		if abs%scale != 0 {
			short = amount
		}
	}
	p := patternOf(l, cur)
	return sign + l.T(p.key, map[string]any{"Amount": amount, "Short": short, "Code": cur, "Symbol": p.symbol})
}

// moneyPattern is how a language writes a currency: its symbol there and
// the catalogue key that places it.
type moneyPattern struct{ symbol, key string }

var patterns sync.Map // [2]string{tag, currency} → moneyPattern

// patternOf is l's pattern for cur, worked out once (a page writes many
// amounts).
func patternOf(l Lang, cur string) moneyPattern {
	id := [2]string{l.Tag.String(), cur}
	if p, ok := patterns.Load(id); ok {
		return p.(moneyPattern)
	}
	p := moneyPattern{symbol: cur, key: "money.symbol"}
	if u, err := currency.ParseISO(cur); err == nil {
		p.symbol = message.NewPrinter(l.Tag).Sprint(currency.Symbol(u))
	}
	if l.has("money." + cur) {
		p.key = "money." + cur
	} else if p.symbol == cur {
		p.key = "money.code" // no symbol of its own: "5.00 CHF", not "CHF5.00"
	}
	patterns.Store(id, p)
	return p
}

// has reports whether l's catalogue (or English's) holds key.
func (l Lang) has(key string) bool { return l.T(key) != key }

// groupWith puts sep between each three digits from the right.
func groupWith(digits, sep string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	b.WriteString(digits[:lead])
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// Time is t as l writes a date and time, in UTC: the server's words for
// pages without scripts; localtime.js writes it again in the viewer's own
// zone and the page's language.
func (l Lang) Time(t time.Time) string { return t.UTC().Format(l.T("time.datetime")) }

// Day is t's date and time without the year ("2 Jan 15:04:05 UTC"), for
// timelines.
func (l Lang) Day(t time.Time) string { return t.UTC().Format(l.T("time.day")) }

// Window is a span of time as l says it, to the second ("48 hours",
// "1 hour 30 minutes"; "48 小时").
func (l Lang) Window(d time.Duration) string {
	d = d.Round(time.Second)
	var parts []string
	for _, u := range []struct {
		size time.Duration
		key  string
	}{{time.Hour, "window.hours"}, {time.Minute, "window.minutes"}, {time.Second, "window.seconds"}} {
		if n := int(d / u.size); n > 0 {
			d -= time.Duration(n) * u.size
			parts = append(parts, l.N(u.key, n))
		}
	}
	if len(parts) == 0 {
		return l.N("window.seconds", 0)
	}
	return strings.Join(parts, l.T("window.join"))
}

// Package views holds refundd's templ components: the layout, pages, and the
// fragments that later travel over SSE. Components take plain values and
// never reach the database.
package views

import (
	"fmt"
	"strconv"
	"strings"
)

// symbols are the currencies shown with a symbol; others show their code.
var symbols = map[string]string{"EUR": "€", "USD": "$", "GBP": "£", "JPY": "¥"}

// zeroDecimal are ISO 4217 currencies whose minor unit is the major unit.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true, "ISK": true, "CLP": true, "VND": true}

// Money formats an amount in minor units, e.g. Money(12999, "EUR") = "€129.99"
// and Money(500, "CHF") = "5.00 CHF". Integer arithmetic only: no float ever
// touches an amount.
func Money(minor int64, currency string) string {
	sign := ""
	// Work in uint64 so the most negative int64 still formats.
	abs := uint64(minor)
	if minor < 0 {
		sign = "-"
		abs = uint64(-(minor + 1)) + 1
	}
	var num string
	if zeroDecimal[currency] {
		num = group(strconv.FormatUint(abs, 10))
	} else {
		num = fmt.Sprintf("%s.%02d", group(strconv.FormatUint(abs/100, 10)), abs%100)
	}
	if s, ok := symbols[currency]; ok {
		return sign + s + num
	}
	return sign + num + " " + currency
}

// group puts thousands separators into a string of digits.
func group(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// OrderRowID is the stable element ID of an order's row on the home page.
func OrderRowID(orderID int64) string { return "order-" + strconv.FormatInt(orderID, 10) }

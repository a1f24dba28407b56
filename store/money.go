package store

import (
	"fmt"
	"strconv"
	"strings"
)

// currencySymbols are the currencies written with a symbol; others show
// their code after the amount.
var currencySymbols = map[string]string{"EUR": "€", "USD": "$", "GBP": "£", "JPY": "¥"}

// zeroDecimal are ISO 4217 currencies whose minor unit is the major unit.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true, "ISK": true, "CLP": true, "VND": true}

// MinorDigits is how many decimals an amount in currency has (2 for EUR,
// 0 for JPY), so "12.50" can be read into minor units exactly.
func MinorDigits(currency string) int {
	if zeroDecimal[currency] {
		return 0
	}
	return 2
}

// FormatMoney renders an amount in minor units for a person, the same way on
// every page, message and narration: FormatMoney(129900, "EUR") is
// "€1,299.00", FormatMoney(500, "JPY") is "¥500" and FormatMoney(500, "CHF")
// is "5.00 CHF". Integer arithmetic only: no float ever touches an amount.
func FormatMoney(minor int64, currency string) string {
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
	if sym, ok := currencySymbols[currency]; ok {
		return sign + sym + num
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

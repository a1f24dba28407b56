package store

import "fmt"

var currencySymbols = map[string]string{"EUR": "€", "USD": "$", "GBP": "£"}

// FormatMoney renders integer minor units for a person: "€129.99".
// Every currency refundd seeds has two decimals.
func FormatMoney(minor int64, currency string) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	n := fmt.Sprintf("%d.%02d", minor/100, minor%100)
	if sym, ok := currencySymbols[currency]; ok {
		return sign + sym + n
	}
	return sign + n + " " + currency
}

package store_test

import (
	"math"
	"testing"

	"github.com/refundd/refundd/store"
)

func TestFormatMoney(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{12999, "EUR", "€129.99"},
		{129900, "EUR", "€1,299.00"},
		{8950, "EUR", "€89.50"},
		{5, "USD", "$0.05"},
		{0, "GBP", "£0.00"},
		{123456789, "USD", "$1,234,567.89"},
		{-1599, "EUR", "-€15.99"},
		{500, "CHF", "5.00 CHF"},
		{500, "JPY", "¥500"},
		{1500, "JPY", "¥1,500"},
		{math.MinInt64, "USD", "-$92,233,720,368,547,758.08"},
	} {
		if got := store.FormatMoney(tc.minor, tc.currency); got != tc.want {
			t.Errorf("FormatMoney(%d, %s) = %q, want %q", tc.minor, tc.currency, got, tc.want)
		}
	}
}

func TestMinorDigits(t *testing.T) {
	t.Parallel()
	for currency, want := range map[string]int{"EUR": 2, "CHF": 2, "JPY": 0} {
		if got := store.MinorDigits(currency); got != want {
			t.Errorf("MinorDigits(%s) = %d, want %d", currency, got, want)
		}
	}
}

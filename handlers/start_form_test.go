package handlers

import (
	"strings"
	"testing"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

func TestStartForm_Validate(t *testing.T) {
	t.Parallel()
	orders := []store.Order{
		{ID: 3, Amount: 12999, Currency: "EUR", Refundable: 0},
		{ID: 4, Amount: 150000, Currency: "JPY", Refundable: 150000},
	}
	valid := startForm{RequestID: " req-1 ", OrderID: "3", Amount: " 12.50 ", Reason: "  torn  "}
	got, err := valid.Validate(orders)
	if err != nil {
		t.Fatalf("Validate(%+v) = %v, want no error", valid, err)
	}
	// Nothing refundable left is the store's call: a second submit of
	// the same form must still find the run the first one started.
	want := store.StartRequest{ClientRequestID: "req-1", OrderID: 3, Amount: 1250, Reason: "torn"}
	if got != want {
		t.Errorf("Validate = %+v, want %+v", got, want)
	}
	// A decimal comma reads the same.
	valid.Amount = "12,50"
	if got, err := valid.Validate(orders); err != nil || got != want {
		t.Errorf("Validate with 12,50 = %+v, %v; want %+v", got, err, want)
	}

	for _, tc := range []struct {
		name string
		edit func(*startForm)
		says string
	}{
		{"no request ID", func(f *startForm) { f.RequestID = " " }, "out of date"},
		{"request ID too long", func(f *startForm) { f.RequestID = strings.Repeat("x", store.MaxRequestIDLen+1) }, "out of date"},
		{"no order", func(f *startForm) { f.OrderID = "" }, "Choose one of your orders"},
		{"order not a number", func(f *startForm) { f.OrderID = "3x" }, "Choose one of your orders"},
		{"someone else's order", func(f *startForm) { f.OrderID = "99" }, "Choose one of your orders"},
		{"no amount", func(f *startForm) { f.Amount = "" }, "Enter the amount"},
		{"zero", func(f *startForm) { f.Amount = "0.00" }, "more than zero"},
		{"negative", func(f *startForm) { f.Amount = "-1" }, "like 12.50"},
		{"three decimals", func(f *startForm) { f.Amount = "1.005" }, "at most 2 decimals"},
		{"misplaced grouping", func(f *startForm) { f.Amount = "1,00.00" }, "like 12.50 or 12,50"},
		{"exponent", func(f *startForm) { f.Amount = "1e3" }, "like 12.50"},
		{"trailing point", func(f *startForm) { f.Amount = "12." }, "like 12.50"},
		{"overflow", func(f *startForm) { f.Amount = "999999999999999999999" }, "too large"},
		{"decimals in JPY", func(f *startForm) { f.OrderID, f.Amount = "4", "15.5" }, "no cents"},
		{"no reason", func(f *startForm) { f.Reason = " \n " }, "Say why"},
		{"reason too long", func(f *startForm) { f.Reason = strings.Repeat("é", store.MaxReasonLen+1) }, "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := valid
			tc.edit(&f)
			_, err := f.Validate(orders)
			if store.ErrorCode(err) != store.CodeInvalid || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Validate(%+v) = %v, want an invalid error saying %q", f, err, tc.says)
			}
		})
	}
}

func TestParseAmount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		digits int
		want   int64
	}{
		{"12.50", 2, 1250},
		{"3,50", 2, 350},
		{"3,5", 2, 350},
		{"12.5", 2, 1250},
		{"12", 2, 1200},
		{"0.01", 2, 1},
		{"007.10", 2, 710},
		{"1500", 0, 1500},
		{"92233720368547758.07", 2, 9223372036854775807},
		{"1,000.00", 2, 100000},
		{"1,000", 2, 100000},
		{"1,000", 0, 1000},
	} {
		got, err := parseAmount(tc.in, tc.digits, views.English)
		if err != nil || got != tc.want {
			t.Errorf("parseAmount(%q, %d) = %d, %v; want %d", tc.in, tc.digits, got, err, tc.want)
		}
	}
	for _, in := range []string{"", ".5", "1.2.3", "١٢", "+1", "92233720368547758.08", "0", "1.000,00", "1,2,3", ",5", "1,00.00", "12,3456.7"} {
		if got, err := parseAmount(in, 2, views.English); err == nil {
			t.Errorf("parseAmount(%q) = %d, want an error", in, got)
		}
	}
}

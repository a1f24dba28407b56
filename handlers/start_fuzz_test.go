package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// fuzzOrders are the customer's orders in the form fuzz: one currency with
// cents, one without.
var fuzzOrders = []store.Order{
	{ID: 3, Amount: 12999, Currency: "EUR", Refundable: 12999},
	{ID: 4, Amount: 150000, Currency: "JPY", Refundable: 150000},
}

// FuzzParseAmount holds parseAmount to its rule in English, spelled out
// apart from it: digits, grouped in threes by commas or not, then at most
// one decimal point with at least one digit after it; or digits, a lone
// comma that is not grouping, and digits ("12,50"); no more decimals than
// the currency has, more than zero, within int64. An
// accepted amount formats back, through FormatMoney, to the same number;
// anything else is a store.Error the form shows in words.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"12.50", "12.5", "12", "0.01", "007.10", " 1500 ", "92233720368547758.07",
		"92233720368547758.08", "9223372036854775807", "", ".5", "5.", "1.2.3", "1,000.00", "-1", "+1", "0",
		"0.00", "1e3", "١٢", "１２", "12.5\u00a0", "0x10", "1_000", "1.005", "3,50", "3,5", "1,000", ",5", "5,", "1,2,3", "1.2,3",
		"1,299.50", "12,345,678.9", "1,23.4", ",123", "1,2345", "1234,567"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, jpy bool) {
		currency := "EUR"
		if jpy {
			currency = "JPY"
		}
		digits := store.MinorDigits(currency)
		minor, err := parseAmount(s, digits, views.English)

		want, ok := amountByRule(s, digits)
		if !ok {
			var se *store.Error
			if !errors.As(err, &se) || se.Code != store.CodeInvalid || se.Message == "" || minor != 0 {
				t.Fatalf("parseAmount(%q, %d) = %d, %v; want 0 and an invalid store.Error in words", s, digits, minor, err)
			}
			return
		}
		if err != nil || minor != want {
			t.Fatalf("parseAmount(%q, %d) = %d, %v; want %d, nil", s, digits, minor, err, want)
		}
		// Round trip through what a person reads: the same number, and it
		// parses back to the same minor units.
		shown := moneyNumber(minor, currency)
		if got, wantText := shown, canonicalAmount(s, digits); got != wantText {
			t.Errorf("FormatMoney(%d, %s) reads %q, want %q (typed %q)", minor, currency, got, wantText, s)
		}
		if back, err := parseAmount(shown, digits, views.English); err != nil || back != minor {
			t.Errorf("parseAmount(%q) = %d, %v; want %d back", shown, back, err, minor)
		}
	})
}

// English amounts as the form takes them, before range checks: grouped
// (or not) with a decimal point, or with a decimal comma that cannot be
// grouping.
var (
	amountPattern      = regexp.MustCompile(`^([0-9]+|[0-9]{1,3}(?:,[0-9]{3})+)(?:\.([0-9]+))?$`)
	amountCommaPattern = regexp.MustCompile(`^([0-9]+),([0-9]+)$`)
)

// amountParts are the whole digits (grouping taken out) and decimals of
// s by the rule, and whether it follows the rule.
func amountParts(s string) (whole, frac string, ok bool) {
	s = strings.TrimSpace(s)
	if m := amountPattern.FindStringSubmatch(s); m != nil {
		return strings.ReplaceAll(m[1], ",", ""), m[2], true
	}
	if m := amountCommaPattern.FindStringSubmatch(s); m != nil {
		return m[1], m[2], true
	}
	return "", "", false
}

// amountByRule is the minor units s stands for with digits decimals, and
// whether the form accepts it.
func amountByRule(s string, digits int) (int64, bool) {
	whole, frac, ok := amountParts(s)
	if !ok || len(frac) > digits {
		return 0, false
	}
	n, _ := new(big.Int).SetString(whole+frac+strings.Repeat("0", digits-len(frac)), 10)
	if n.Sign() <= 0 || !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

// canonicalAmount is s as FormatMoney writes its number: no leading zeros,
// exactly digits decimals, no grouping.
func canonicalAmount(s string, digits int) string {
	whole, frac, _ := amountParts(s)
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	if digits == 0 {
		return whole
	}
	return whole + "." + frac + strings.Repeat("0", digits-len(frac))
}

// moneyNumber is FormatMoney without its currency symbol and
// thousands separators: the number a person could type back.
func moneyNumber(minor int64, currency string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || ('0' <= r && r <= '9') {
			return r
		}
		return -1
	}, store.FormatMoney(minor, currency))
}

// FuzzStartForm holds the refund form to what the store will take: every
// posted form is either refused with an invalid store.Error in words, or
// read into a start request that carries exactly what was typed (trimmed)
// for one of the customer's orders; and the store's own Validate then
// accepts it only as text PostgreSQL and a page can hold.
func FuzzStartForm(f *testing.F) {
	f.Add(" req-1 ", "3", " 12.50 ", "  torn  ")
	f.Add("req-2", "4", "1500", "Sole came off.\r\n\tSecond line: ünïcode ✓")
	f.Add("req-3", "4", "15.5", "why")
	f.Add("req-4", "99", "1", "someone else's order")
	f.Add("req-5", " 3 ", "0.00", "zero")
	f.Add("req\x00", "3", "1", "nul in the ID")
	f.Add("req-7", "3", "1", "nul\x00 in the reason")
	f.Add("req-8", "3", "1", "bad \xff byte")
	f.Add("req-9", "3", "1", "bell\a")
	f.Add("k\tl", "3", "1", "tab in the ID")
	f.Add(strings.Repeat("x", store.MaxRequestIDLen), "3", "1.00", strings.Repeat("é", store.MaxReasonLen))
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, requestID, orderID, amount, reason string) {
		form := startForm{RequestID: requestID, OrderID: orderID, Amount: amount, Reason: reason}
		req, err := form.Validate(fuzzOrders)
		if err != nil {
			var se *store.Error
			if !errors.As(err, &se) || se.Code != store.CodeInvalid || se.Message == "" || req != (store.StartRequest{}) {
				t.Fatalf("Validate(%+v) = %+v, %v; want an invalid store.Error in words", form, req, err)
			}
			return
		}
		var order *store.Order
		for i := range fuzzOrders {
			if fuzzOrders[i].ID == req.OrderID {
				order = &fuzzOrders[i]
			}
		}
		if order == nil {
			t.Fatalf("Validate(%+v) chose order %d, not one of the customer's", form, req.OrderID)
		}
		if typed, ok := new(big.Int).SetString(strings.TrimSpace(orderID), 10); !ok || !typed.IsInt64() || typed.Int64() != req.OrderID {
			t.Errorf("order = %d, typed %q", req.OrderID, orderID)
		}
		wantAmount, ok := amountByRule(amount, store.MinorDigits(order.Currency))
		if !ok || req.Amount != wantAmount {
			t.Errorf("amount = %d, typed %q in %s: want %d (accepted by the rule: %v)", req.Amount, amount, order.Currency, wantAmount, ok)
		}
		if req.ClientRequestID != strings.TrimSpace(requestID) || req.Reason != strings.TrimSpace(reason) {
			t.Errorf("Validate(%+v) = %+v: want the ID and reason as typed, trimmed", form, req)
		}
		if n := len(req.ClientRequestID); n == 0 || n > store.MaxRequestIDLen {
			t.Errorf("Validate accepted a request ID of %d bytes, want 1..%d", n, store.MaxRequestIDLen)
		}
		if n := utf8.RuneCountInString(req.Reason); n == 0 || n > store.MaxReasonLen {
			t.Errorf("Validate accepted a reason of %d characters, want 1..%d", n, store.MaxReasonLen)
		}

		req.OwnerID = 1
		checkStoreValidate(t, req)
	})
}

// FuzzDecodeStartBody holds the API's start body to strict JSON: a body is
// refused with invalid_json (or body_too_large past the limit), or it is
// exactly one JSON object whose keys are the body's field names, each once
// and spelled exactly, with each value read as written; the store's
// Validate then accepts it only as text PostgreSQL and a page can hold.
func FuzzDecodeStartBody(f *testing.F) {
	for _, s := range []string{
		`{"order_id":3,"amount":1250,"reason":"torn"}`,
		`{"order_id":3,"amount":1250,"reason":"a\r\nb\t✓"}`,
		`{"AMOUNT":1,"Amount":2}`,
		`{"amount":1,"amount":2}`,
		`{"Amount":2}`,
		`{"amo\u0075nt":1,"amount":2}`,
		`{"reason":"\u0000"}`,
		`{"reason":"\ud800"}`,
		`{"reason":null,"amount":null}`,
		`{"amount":1.5}`,
		`{"amount":"12"}`,
		`{"amount":99999999999999999999}`,
		`{"nope":1}`,
		`{} {}`,
		`{}`,
		` {} `,
		`[]`,
		``,
		`{"order_id":3,"amount":1,"reason":"x"`,
		"{\"reason\":\"\xff\"}",
	} {
		f.Add([]byte(s), uint16(64))
	}
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		var b apiStartBody
		bad := decodeJSON(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), int64(limit)), &b)
		if len(body) > int(limit) {
			if bad == nil || bad.status != http.StatusRequestEntityTooLarge || bad.code != codeBodyTooLarge || bad.message == "" {
				t.Fatalf("decodeJSON(%q) over a limit of %d = %+v; want 413 body_too_large", body, limit, bad)
			}
			return
		}
		if bad != nil {
			if bad.status != http.StatusBadRequest || bad.code != codeInvalidJSON || bad.message == "" {
				t.Fatalf("decodeJSON(%q) = %+v; want 400 invalid_json in words", body, bad)
			}
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) || !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
			t.Fatalf("decodeJSON(%q) accepted it: want one JSON object in UTF-8", body)
		}
		// Each key once, spelled as the field is, and its value read as
		// written: nothing decoded from another key than the one sent.
		want := startBodyByKeys(t, body)
		if !reflect.DeepEqual(b, want) {
			t.Fatalf("decodeJSON(%q) read %+v, want %+v", body, b, want)
		}

		checkStoreValidate(t, store.StartRequest{OwnerID: 1, ClientRequestID: "key", OrderID: b.OrderID, Amount: b.Amount, Reason: b.Reason})
	})
}

// startBodyByKeys reads body, a JSON object decodeJSON accepted, key by
// key, and fails unless each key is one of apiStartBody's field names, sent
// once, with a value that reads as that field. It returns the fields so
// read.
func startBodyByKeys(t *testing.T, body []byte) apiStartBody {
	t.Helper()
	var want apiStartBody
	dec := json.NewDecoder(bytes.NewReader(body))
	_, _ = dec.Token() // {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("decodeJSON(%q) accepted it, but its keys do not read: %v", body, err)
		}
		key := tok.(string)
		if seen[key] {
			t.Fatalf("decodeJSON(%q) accepted the key %q twice", body, key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("decodeJSON(%q) accepted it, but the value of %q does not read: %v", body, key, err)
		}
		var field any
		switch key {
		case "order_id":
			field = &want.OrderID
		case "amount":
			field = &want.Amount
		case "reason":
			field = &want.Reason
		case "refunds":
			field = &want.Refunds
		default:
			t.Fatalf("decodeJSON(%q) accepted the key %q, which is no field of the body", body, key)
		}
		if err := json.Unmarshal(raw, field); err != nil {
			t.Fatalf("decodeJSON(%q) accepted %q: %s, which does not read as that field: %v", body, key, raw, err)
		}
	}
	return want
}

// checkStoreValidate holds store.StartRequest.Validate to what PostgreSQL
// and the pages need: it refuses with an invalid store.Error in words, or
// it leaves valid UTF-8 without NUL, and without control characters but
// the reason's line breaks and tabs.
func checkStoreValidate(t *testing.T, req store.StartRequest) {
	t.Helper()
	err := req.Validate()
	if err != nil {
		var se *store.Error
		if !errors.As(err, &se) || se.Code != store.CodeInvalid || se.Message == "" {
			t.Fatalf("StartRequest%+v.Validate() = %v; want an invalid store.Error in words", req, err)
		}
		return
	}
	if !storableText(req.ClientRequestID, false) || !storableText(req.Reason, true) {
		t.Fatalf("StartRequest%+v.Validate() accepted text PostgreSQL or a page cannot hold", req)
	}
}

// storableText is the store's rule for text, spelled out apart from it.
func storableText(s string, multiline bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == 0 || (unicode.IsControl(r) && !(multiline && (r == '\t' || r == '\n' || r == '\r'))) {
			return false
		}
	}
	return true
}

package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// Every text a client sends passes one check, store.ValidText, here,
// called by the body gate (body.go) before any handler: query parameters,
// form fields, JSON strings (keys included) and the headers read as text. NUL, invalid UTF-8, a JSON lone
// surrogate and control characters other than line breaks and tab are a
// 422 naming the field. Nothing is rewritten: encoding/json would turn
// invalid UTF-8 and a lone surrogate into U+FFFD, and PostgreSQL refuses
// NUL, so both are caught in the raw bytes first.

// textHeaders are the request headers handlers read as text.
var textHeaders = []string{"Idempotency-Key", "Last-Event-ID"}

// checkText is the one validator: nil, or the 422 naming field.
func checkText(field, value string) error {
	if err := store.ValidText(value, true); err != nil {
		return store.Refuse(store.CodeInvalid, "refuse.field_text", map[string]any{"Field": strconv.Quote(field), "Why": err})
	}
	return nil
}

// checkValues checks every name and value of a query or form.
func checkValues(values url.Values) error {
	for name, vs := range values {
		if err := checkText("parameter name", name); err != nil {
			return err
		}
		for _, v := range vs {
			if err := checkText(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonLevel is one object or array open around the walk's position. It
// holds no text: a key is its span in the body, decoded only when an error
// names the path, so the walk's memory is the levels' fixed size.
type jsonLevel struct {
	object    bool
	expectKey bool   // object: the next string is a key
	key       [2]int // object: the current key's span in the body, quotes included
	index     int    // array: the current element's index
}

// checkJSONText checks every string of a JSON document, keys included,
// naming a bad one by its path ("refunds[0].order_id"), and reports
// whether the document nests deeper than maxDepth. It reads the body once,
// in memory bounded by maxDepth (the strings it checks aside, each once),
// and never fails on what is no JSON: json.Valid judges that.
func checkJSONText(data []byte, maxDepth int) (textErr error, tooDeep bool) {
	levels := make([]jsonLevel, 0, min(maxDepth, 64))
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			if len(levels) == maxDepth {
				return textErr, true
			}
			levels = append(levels, jsonLevel{object: data[i] == '{', expectKey: data[i] == '{'})
		case '}', ']':
			if len(levels) > 0 {
				levels = levels[:len(levels)-1]
			}
		case ',':
			if n := len(levels); n > 0 && levels[n-1].object {
				levels[n-1].expectKey = true
			} else if n > 0 {
				levels[n-1].index++
			}
		case '"':
			end := stringEnd(data, i)
			if end == len(data) {
				return textErr, false // unterminated: no JSON
			}
			if textErr == nil {
				textErr = checkJSONString(data, levels, i, end+1)
			}
			i = end
		}
	}
	return textErr, false
}

// stringEnd is the index of the quote closing the JSON string opened at
// data[i], or len(data) if there is none.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(data)
}

// checkJSONString checks the JSON string data[from:to] (quotes included)
// at the walk's position: a key of the innermost object, or a value.
func checkJSONString(data []byte, levels []jsonLevel, from, to int) error {
	field := func() string { return jsonPath(data, levels) }
	if n := len(levels); n > 0 && levels[n-1].object && levels[n-1].expectKey {
		levels[n-1].key, levels[n-1].expectKey = [2]int{from, to}, false
		field = func() string {
			if p := jsonPath(data, levels[:n-1]); p != "body" {
				return p + ".field name"
			}
			return "field name"
		}
	}
	quoted := data[from:to]
	raw := quoted[1 : len(quoted)-1]
	if !utf8.Valid(raw) {
		return checkText(field(), string(raw)) // says it is not UTF-8
	}
	s := string(raw)
	if bytes.IndexByte(raw, '\\') >= 0 {
		if loneSurrogate(raw) {
			return store.Refuse(store.CodeInvalid, "refuse.field_surrogate", map[string]any{"Field": strconv.Quote(field()), "From": `\ud800`, "To": `\udfff`})
		}
		if json.Unmarshal(quoted, &s) != nil {
			return nil // no JSON: json.Valid refuses it
		}
	}
	if store.ValidText(s, true) != nil {
		return checkText(field(), s)
	}
	return nil
}

// jsonPath names the value the walk is at: "refunds[0].order_id", or
// "body" for the document itself.
func jsonPath(data []byte, levels []jsonLevel) string {
	var b strings.Builder
	for _, l := range levels {
		if !l.object {
			b.WriteString("[" + strconv.Itoa(l.index) + "]")
			continue
		}
		var key string
		_ = json.Unmarshal(data[l.key[0]:l.key[1]], &key)
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// loneSurrogate reports whether raw JSON holds a \u escape of a UTF-16
// surrogate that is not one half of a pair.
func loneSurrogate(raw []byte) bool {
	high := false // the last escape was a high surrogate awaiting its low
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			if high {
				return true
			}
			continue
		}
		i++
		if raw[i] != 'u' || i+4 >= len(raw) {
			if high {
				return true
			}
			continue
		}
		n, err := strconv.ParseUint(string(raw[i+1:i+5]), 16, 16)
		i += 4
		switch {
		case err != nil:
			return false // no JSON; the decoder refused it already
		case n >= 0xD800 && n < 0xDC00:
			if high {
				return true
			}
			high = true
		case n >= 0xDC00 && n < 0xE000:
			if !high {
				return true
			}
			high = false
		default:
			if high {
				return true
			}
		}
	}
	return high
}

// outOfRange is the 400 for an integer query parameter that parsed but
// does not fit its column (strconv.ErrRange), or nil.
func outOfRange(name string, err error) error {
	if !errors.Is(err, strconv.ErrRange) {
		return nil
	}
	return echo.NewHTTPError(http.StatusBadRequest).SetInternal(fmt.Errorf("query parameter %s: %w", name, err))
}

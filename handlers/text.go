package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// Every text a client sends passes one check, store.ValidText, here,
// before any handler: query parameters, form fields, JSON strings (keys
// included) and the headers read as text. NUL, invalid UTF-8, a JSON lone
// surrogate and control characters other than line breaks and tab are a
// 422 naming the field. Nothing is rewritten: encoding/json would turn
// invalid UTF-8 and a lone surrogate into U+FFFD, and PostgreSQL refuses
// NUL, so both are caught in the raw bytes first.

// textHeaders are the request headers handlers read as text.
var textHeaders = []string{"Idempotency-Key", "Last-Event-ID"}

// checkText is the one validator: nil, or the 422 naming field.
func checkText(field, value string) error {
	if err := store.ValidText(value, true); err != nil {
		return store.Errorf(store.CodeInvalid, "The field %s %s.", strconv.Quote(field), err.Error())
	}
	return nil
}

// checkClientText refuses a request any of whose text fails checkText.
func checkClientText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		// echo keeps the parsed query for the handler's QueryParam.
		if err := checkValues(c.QueryParams()); err != nil {
			return err
		}
		for _, name := range textHeaders {
			for _, v := range req.Header.Values(name) {
				if err := checkText(name, v); err != nil {
					return err
				}
			}
		}
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		media, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
		if media != echo.MIMEApplicationForm && media != echo.MIMEApplicationJSON {
			return next(c)
		}
		data, readErr := io.ReadAll(req.Body)
		// The handler reads the same body, and meets the same read error
		// (a body past the limit) at the same place.
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(data), errorReader{readErr}))
		if readErr == nil {
			var err error
			if media == echo.MIMEApplicationForm {
				if values, perr := url.ParseQuery(string(data)); perr == nil {
					err = checkValues(values)
				}
			} else {
				err = checkJSONText(data)
			}
			if err != nil {
				return err
			}
		}
		return next(c)
	}
}

// errorReader returns err, or io.EOF for none.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
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

// jsonFrame is one object or array open around the walk's position.
type jsonFrame struct {
	path      string
	object    bool
	expectKey bool   // object: the next string is a key
	key       string // object: the last key
	index     int    // array: the next element's index
}

// checkJSONText checks every string of a JSON document, keys included,
// naming each by its path ("refunds[0].order_id"). A document that is no
// JSON is left to the handler to refuse.
func checkJSONText(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*jsonFrame
	start := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or no JSON: the handler says so
		}
		end := dec.InputOffset()
		raw := data[start:end]
		start = end
		var top *jsonFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.expectKey {
			top.key, top.expectKey = s, false
			if err := checkJSONString(joinPath(top.path, "")+"field name", s, raw); err != nil {
				return err
			}
			continue
		}
		path := valuePath(top)
		switch v := tok.(type) {
		case json.Delim:
			stack = append(stack, &jsonFrame{path: path, object: v == '{', expectKey: v == '{'})
		case string:
			if err := checkJSONString(path, v, raw); err != nil {
				return err
			}
		}
	}
}

// valuePath names the value at the walk's position and moves past it.
func valuePath(top *jsonFrame) string {
	switch {
	case top == nil:
		return "body"
	case top.object:
		top.expectKey = true
		return joinPath(top.path, top.key)
	default:
		top.index++
		return top.path + "[" + strconv.Itoa(top.index-1) + "]"
	}
}

func joinPath(parent, name string) string {
	if parent == "" || parent == "body" {
		if name == "" {
			return ""
		}
		return name
	}
	if name == "" {
		return parent + "."
	}
	return parent + "." + name
}

// checkJSONString checks a decoded JSON string s, with raw the bytes it was
// decoded from (and what went before it since the last token).
func checkJSONString(field, s string, raw []byte) error {
	if !utf8.Valid(raw) {
		return checkText(field, string(raw)) // says it is not UTF-8
	}
	if loneSurrogate(raw) {
		return store.Errorf(store.CodeInvalid, "The field %s holds half of a UTF-16 surrogate pair (\\ud800 to \\udfff alone), which is not text.", strconv.Quote(field))
	}
	return checkText(field, s)
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

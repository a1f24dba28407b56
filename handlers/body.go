package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// The gate (readBody) is the one place a request body is read. It runs
// before every handler, before login: whatever a client sends, it costs
// memory and time linear in the body and bounded by settings
// (MAX_BODY_BYTES, MAX_JSON_DEPTH, REQUEST_TIMEOUT), and the handlers read
// only what it parsed: the form it parsed into the request (PostForm,
// MultipartForm), or the JSON body it checked, handed on as bytes. Every
// text in it passes checkText, whatever the body's type.

// DefaultMaxBodyBytes is Config.MaxBodyBytes's default: far above any form
// or request the pages and the API take (a family of MAX_FAMILY_SIZE
// orders is under 2 KB).
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxJSONDepth is Config.MaxJSONDepth's default: the API's bodies
// nest three levels deep.
const DefaultMaxJSONDepth = 64

// bodyKind is what a route reads from a request body.
type bodyKind uint8

const (
	bodyNone       bodyKind = iota // a read: a body is refused unread
	bodyForm                       // a form: urlencoded or multipart
	bodyJSON                       // a JSON document (application/json)
	bodyFormOrJSON                 // the API's decisions: a form, or its fields as a JSON object
)

// accepted names the media types a kind takes, for the 415's words.
func (k bodyKind) accepted() string {
	switch k {
	case bodyForm:
		return "application/x-www-form-urlencoded or multipart/form-data"
	case bodyJSON:
		return "application/json"
	default:
		return "application/json, application/x-www-form-urlencoded or multipart/form-data"
	}
}

func (k bodyKind) takes(media string) bool {
	switch media {
	case echo.MIMEApplicationForm, echo.MIMEMultipartForm:
		return k == bodyForm || k == bodyFormOrJSON
	case echo.MIMEApplicationJSON:
		return k == bodyJSON || k == bodyFormOrJSON
	}
	return false
}

// Codes of the gate's refusals.
const (
	codeBodyNotAllowed   = "body_not_allowed"
	codeUnsupportedMedia = "unsupported_media_type"
	codeInvalidForm      = "invalid_form"
	codeBodyTimeout      = "body_timeout"
)

// bodyGate holds the gate's bounds and every route's bodyKind, keyed by
// method and route path ("POST /runs/:id/approve").
type bodyGate struct {
	maxBytes int64
	maxDepth int
	timeout  time.Duration
	kinds    map[string]bodyKind
}

// readBody is the gate as middleware. The query and the headers read as
// text are checked on every request; a body as the route's kind says.
func (g *bodyGate) readBody(next echo.HandlerFunc) echo.HandlerFunc {
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
		if req.ContentLength == 0 {
			// net/http gives a request without a body http.NoBody.
			return next(c)
		}
		kind, routed := g.kinds[req.Method+" "+c.Path()]
		switch {
		case !routed:
			// No route (404, 405): the answer needs nothing of the body,
			// and it is never read.
			return next(c)
		case kind == bodyNone:
			return refuseBody(http.StatusBadRequest, codeBodyNotAllowed, "api.body_not_allowed", map[string]any{"Method": req.Method})
		}
		media, params, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
		if !kind.takes(media) {
			return refuseBody(http.StatusUnsupportedMediaType, codeUnsupportedMedia, "api.send_body_as", map[string]any{"Media": kind.accepted()})
		}
		data, err := g.read(c)
		if err != nil {
			return err
		}
		switch media {
		case echo.MIMEApplicationJSON:
			if err := g.checkJSON(data); err != nil {
				return err
			}
			if kind == bodyFormOrJSON {
				values, err := jsonForm(data)
				if err != nil {
					return err
				}
				if err := setForm(req, values, nil); err != nil {
					return err
				}
				break
			}
			req.Body = io.NopCloser(bytes.NewReader(data))
		case echo.MIMEApplicationForm:
			values, perr := url.ParseQuery(string(data))
			if perr != nil {
				return invalidForm("The form could not be read: it is not valid URL encoding.")
			}
			if err := setForm(req, values, nil); err != nil {
				return err
			}
		default: // multipart/form-data
			values, err := readMultipart(data, params["boundary"])
			if err != nil {
				return err
			}
			if err := setForm(req, values, &multipart.Form{Value: values}); err != nil {
				return err
			}
		}
		return next(c)
	}
}

func invalidForm(key string) *badBody {
	return refuseBody(http.StatusBadRequest, codeInvalidForm, key, nil)
}

// read reads the whole body, at most maxBytes of it, within the request's
// time: a client that sends its body slowly is cut at REQUEST_TIMEOUT, as
// a slow handler is, instead of holding its connection for the server's
// ReadTimeout.
func (g *bodyGate) read(c echo.Context) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > g.maxBytes {
		return nil, g.tooLarge()
	}
	// A ResponseWriter that cannot set deadlines (a test's recorder) is
	// left with the server's ReadTimeout.
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(g.timeout))
	body := http.MaxBytesReader(c.Response(), req.Body, g.maxBytes)
	var data []byte
	var err error
	if req.ContentLength > 0 {
		data = make([]byte, req.ContentLength)
		_, err = io.ReadFull(body, data)
	} else {
		data, err = io.ReadAll(body)
	}
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		return data, nil
	case errors.As(err, &maxErr):
		return nil, g.tooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		// net/http cancels the request's context when a read fails; the
		// answer is rendered all the same.
		c.SetRequest(req.WithContext(context.WithoutCancel(req.Context())))
		c.Response().Header().Set(echo.HeaderConnection, "close")
		return nil, refuseBody(http.StatusRequestTimeout, codeBodyTimeout, "api.body_timeout", map[string]any{"Timeout": g.timeout})
	}
	return nil, invalidForm("api.body_short")
}

func (g *bodyGate) tooLarge() *badBody {
	return refuseBody(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "api.request_too_large", map[string]any{"Max": g.maxBytes})
}

// checkJSON refuses a body nested deeper than maxDepth or that is no JSON
// (400), then one with a text that is not text (422, naming the field).
func (g *bodyGate) checkJSON(data []byte) error {
	textErr, tooDeep := checkJSONText(data, g.maxDepth)
	switch {
	case tooDeep:
		return invalidJSON("api.too_deep", map[string]any{"Max": g.maxDepth})
	case !json.Valid(data):
		if json.NewDecoder(bytes.NewReader(data)).Decode(&json.RawMessage{}) == nil {
			return invalidJSON("api.body_two_values", nil)
		}
		return invalidJSON("api.body_not_json", nil)
	}
	return textErr
}

// setForm checks every name and value of a parsed form and hands it to the
// handlers as the request's form: net/http's ParseForm and
// ParseMultipartForm (which echo's FormValue and FormParams call) find it
// parsed and read no body.
func setForm(req *http.Request, values url.Values, mf *multipart.Form) error {
	if err := checkValues(values); err != nil {
		return err
	}
	form := make(url.Values, len(values))
	for k, v := range values {
		form[k] = v
	}
	for k, v := range req.URL.Query() {
		form[k] = append(form[k], v...)
	}
	req.PostForm, req.Form, req.MultipartForm = values, form, mf
	return nil
}

// readMultipart reads a multipart/form-data body held in memory into its
// fields. Files are refused: no form here uploads one.
func readMultipart(data []byte, boundary string) (url.Values, error) {
	if boundary == "" {
		return nil, invalidForm("api.multipart_boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(data), boundary)
	values := url.Values{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return values, nil
		}
		if err != nil {
			return nil, invalidForm("api.multipart_invalid")
		}
		name := part.FormName()
		if part.FileName() != "" || name == "" {
			return nil, refuseBody(http.StatusUnprocessableEntity, codeInvalidForm, "api.form_no_files", nil)
		}
		v, err := io.ReadAll(part)
		if err != nil {
			return nil, invalidForm("api.multipart_invalid")
		}
		values[name] = append(values[name], string(v))
	}
}

// jsonForm reads a JSON object of strings (or lists of strings) as the
// form it stands for: {"reason":"…"} is reason=….
func jsonForm(data []byte) (url.Values, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, invalidJSON("api.body_not_json_object", nil)
	}
	values := make(url.Values, len(fields))
	for name, raw := range fields {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			values[name] = []string{one}
			continue
		}
		var list []string
		if json.Unmarshal(raw, &list) != nil {
			return nil, invalidJSON("api.field_not_string", map[string]any{"Field": strconv.Quote(name)})
		}
		values[name] = list
	}
	return values, nil
}

// bodyKinds is every route's bodyKind, keyed as bodyGate.kinds is.
func bodyKinds(routes []route) map[string]bodyKind {
	kinds := make(map[string]bodyKind, len(routes))
	for _, r := range routes {
		kinds[r.method+" "+r.path] = r.body
	}
	return kinds
}

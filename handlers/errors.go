package handlers

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// problem is how one error is shown: the status, a stable code for the JSON
// API, and the words a person reads.
type problem struct {
	status  int
	code    string
	title   string
	message string
	state   string // a run's state, for a conflict about it
}

// statusByCode maps the store's error codes to HTTP statuses: the one place
// that does.
var statusByCode = map[string]int{
	store.CodeNotFound:            http.StatusNotFound,
	store.CodeInvalid:             http.StatusUnprocessableEntity,
	store.CodeIdempotencyConflict: http.StatusUnprocessableEntity,
	store.CodeCursorExpired:       http.StatusGone,
	store.CodeCursorInvalid:       http.StatusGone,
	store.CodeConflict:            http.StatusConflict,
	store.CodeForbidden:           http.StatusForbidden,
	store.CodeRateLimited:         http.StatusTooManyRequests,
	codeInvalidWebhookURL:         http.StatusUnprocessableEntity,
	codeUnknownEventType:          http.StatusUnprocessableEntity,
	codeTooManyWebhooks:           http.StatusConflict,
}

// narrowCodes are codes of one kind of refusal among several of their
// status: an echo error of that status is never one of them.
var narrowCodes = []string{store.CodeIdempotencyConflict, store.CodeCursorInvalid,
	codeInvalidWebhookURL, codeUnknownEventType, codeTooManyWebhooks}

// Codes the handlers add to the store's vocabulary.
const (
	codeUnauthorized = "unauthorized"
	codeInternal     = "internal"
	codeUnavailable  = "unavailable"
)

// retryAfter is what a 503 asks the client to wait, in seconds: a stalled
// database or an overloaded one needs a moment, not a hammering.
const retryAfter = "5"

// wordStatuses are the statuses the catalogues have a title and message
// for ("error.404.title", "error.404.message"): the default words of errors
// that carry no person-readable message of their own.
var wordStatuses = []int{
	http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusMethodNotAllowed, http.StatusConflict, http.StatusGone, http.StatusRequestEntityTooLarge,
	http.StatusMisdirectedRequest, http.StatusUnprocessableEntity, http.StatusTooManyRequests,
	http.StatusServiceUnavailable, http.StatusInternalServerError,
}

// problemFor is how err is shown in English.
func problemFor(err error) problem { return problemIn(err, views.English) }

// problemIn is how err is shown to a viewer of language l: the code and
// state stay the API's (English) vocabulary, the title and message are l's.
func problemIn(err error, l views.Lang) problem {
	p := problem{status: http.StatusInternalServerError, code: codeInternal}
	var se *store.Error
	var he *echo.HTTPError
	var bb *badBody
	switch {
	case errors.Is(err, context.DeadlineExceeded), store.Unavailable(err):
		// Checked first: the store may wrap it in an error of its own.
		p.status, p.code = http.StatusServiceUnavailable, codeUnavailable
	case errors.As(err, &bb):
		p.status, p.code, p.message = bb.status, bb.code, l.Refusal(bb.words)
	case errors.As(err, &se):
		p.code = se.Code
		p.message, p.state = l.Refusal(se), se.State
		if s, ok := statusByCode[se.Code]; ok {
			p.status = s
		}
	case errors.Is(err, store.ErrNotFound):
		p.status, p.code = http.StatusNotFound, store.CodeNotFound
	case errors.Is(err, store.ErrBadCredentials):
		p.status, p.code, p.message = http.StatusUnauthorized, codeUnauthorized, l.T(keyBadCredentials)
	case errors.As(err, &he):
		p.status = he.Code
		p.code = codeForStatus(he.Code)
	}
	p.title, p.message = statusWords(l, p.status, p.message)
	return p
}

// statusWords are the title of status in l, and message, or the status's
// own message when there is none.
func statusWords(l views.Lang, status int, message string) (string, string) {
	if !slices.Contains(wordStatuses, status) {
		if message == "" {
			message = http.StatusText(status) + "."
		}
		return http.StatusText(status), message
	}
	key := "error." + strconv.Itoa(status)
	if message == "" {
		message = l.T(key + ".message")
	}
	return l.T(key + ".title"), message
}

// viewerLang is the language of the person an answer is for: langOf for
// pages; for the API, the request's Accept-Language first (a client says
// it each time), then the user's saved language, then English.
func viewerLang(c echo.Context) views.Lang {
	if !isAPI(c.Request()) {
		return langOf(c)
	}
	if l, ok := views.Catalogues.Match(c.Request().Header.Get("Accept-Language")); ok {
		return l
	}
	saved := ""
	if u := currentUser(c); u != nil {
		saved = u.Language
	}
	return views.Catalogues.Choose(saved, "")
}

// codeForStatus names statuses that reach us as echo errors (routing, body
// limit, cross-origin refusal).
func codeForStatus(status int) string {
	for code, s := range statusByCode {
		if s == status && !slices.Contains(narrowCodes, code) {
			return code
		}
	}
	switch status {
	case http.StatusUnauthorized:
		return codeUnauthorized
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return codeBodyTooLarge
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return codeUnavailable
	}
	if status >= 500 {
		return codeInternal
	}
	return strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
}

// handleError is echo's error handler: every error a handler returns ends
// here and is shown as a page (or as JSON under /api/). Details go to the
// log, never to the response.
func (h *Handler) handleError(err error, c echo.Context) {
	req := c.Request()
	if errors.Is(err, context.Canceled) && req.Context().Err() != nil {
		// The client went away; nobody is left to answer.
		return
	}
	p := problemIn(err, viewerLang(c))
	if p.status >= 500 {
		h.log.ErrorContext(req.Context(), "request failed", "method", req.Method, "path", req.URL.Path, "status", p.status, "err", err)
	} else {
		h.log.DebugContext(req.Context(), "request refused", "method", req.Method, "path", req.URL.Path, "status", p.status, "err", err)
	}
	if c.Response().Committed {
		return
	}
	if p.status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", retryAfter)
	}
	setRetryAfter(c, err)
	var werr error
	switch {
	case isAPI(req):
		werr = c.JSON(p.status, apiError{Error: apiErrorBody{Code: p.code, Message: p.message, State: p.state}})
	case req.Method == http.MethodHead:
		werr = c.NoContent(p.status)
	default:
		werr = render(c, p.status, views.ErrorPage(currentUser(c), p.status, p.title, p.message))
	}
	if werr != nil {
		h.log.ErrorContext(req.Context(), "write error response", "err", werr)
	}
}

// setRetryAfter tells a client refused by a rate limit when it may come
// back: the limit knows, so the client need not guess and retry early.
func setRetryAfter(c echo.Context, err error) {
	var rl *store.RateLimitedError
	if errors.As(err, &rl) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(rl.RetryAfter.Seconds())))
	}
}

// apiError is the JSON shape of every API error:
// {"error":{"code":"not_found","message":"…"}}.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// State is the run's state when a decision conflicts with it.
	State string `json:"state,omitempty"`
}

func isAPI(r *http.Request) bool {
	return r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/")
}

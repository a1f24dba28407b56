package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// Codes of API requests that cannot be read.
const (
	codeMissingIdempotencyKey = "missing_idempotency_key"
	codeInvalidJSON           = "invalid_json"
	// codeBodyTooLarge is the one code for a body over the limit, whether
	// its Content-Length said so (the body limit) or reading it did.
	codeBodyTooLarge = "body_too_large"
)

// apiBadRequest is a 400 with its own code: the request could not be read,
// so no store call was made.
func apiBadRequest(c echo.Context, code, key string) error {
	return writeBad(c, refuseBody(http.StatusBadRequest, code, key, nil))
}

// apiRefuse is a 400 with its own code whose words are err's (a store
// refusal), as a sentence in the viewer's language.
func apiRefuse(c echo.Context, code string, err error) error {
	return c.JSON(http.StatusBadRequest, apiError{Error: apiErrorBody{Code: code, Message: sentence(viewerLang(c).Refusal(err))}})
}

// apiOrder is an order as the API shows it; amounts in minor units.
type apiOrder struct {
	ID          int64  `json:"id"`
	Description string `json:"description"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Refundable  int64  `json:"refundable"`
}

// apiRun is a run as the API shows it to someone with full access.
type apiRun struct {
	ID    uuid.UUID `json:"id"`
	State string    `json:"state"`
	// Kind is "refund" (one order) or "request" (a family's parent, order_id
	// 0); a child names its parent, and every run its family's root.
	Kind            string        `json:"kind"`
	ParentRunID     uuid.NullUUID `json:"parent_run_id"`
	CorrelationID   uuid.UUID     `json:"correlation_id"`
	OrderID         int64         `json:"order_id"`
	Amount          int64         `json:"amount"`
	Currency        string        `json:"currency"`
	Reason          string        `json:"reason"`
	RetryOf         uuid.NullUUID `json:"retry_of"` // the run this one asks again for
	CancelRequested bool          `json:"cancel_requested"`
	CreatedAt       time.Time     `json:"created_at"`
	UpdatedAt       time.Time     `json:"updated_at"`
	FinishedAt      *time.Time    `json:"finished_at"`
	// CoveringSeq, in the answer to a family's start only, is the run's
	// last seq as that answer read it: where its stream can go on from.
	CoveringSeq *int64 `json:"covering_seq,omitempty"`
	// Children, of a request just started, are its child runs in order.
	Children []apiRun `json:"children,omitempty"`
}

func newAPIRun(r *store.Run) apiRun {
	out := apiRun{ID: r.ID, State: r.State, Kind: r.Kind, ParentRunID: r.ParentRunID, CorrelationID: r.CorrelationID, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Reason: r.Reason, RetryOf: r.RetryOf, CancelRequested: r.CancelRequested(), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.FinishedAt.Valid {
		out.FinishedAt = &r.FinishedAt.Time
	}
	return out
}

// apiOperation is one ledger row; provider_ref is null until the provider
// confirmed the refund.
type apiOperation struct {
	ID          uuid.UUID `json:"id"`
	Kind        string    `json:"kind"`
	State       string    `json:"state"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	ProviderRef *string   `json:"provider_ref"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// apiApproval is the run's approval request and its decision, if any.
type apiApproval struct {
	RequestedAt time.Time  `json:"requested_at"`
	Deadline    *time.Time `json:"deadline"`
	Decision    *string    `json:"decision"`
	DecidedBy   *int64     `json:"decided_by"`
	DecidedAt   *time.Time `json:"decided_at"`
}

// apiSnapshot is GET /api/runs/{id} for full access: one consistent read
// of the run, covering every event up to covering_seq.
type apiSnapshot struct {
	Access       string         `json:"access"`
	Run          apiRun         `json:"run"`
	CoveringSeq  int64          `json:"covering_seq"`
	ReplayFloor  int64          `json:"replay_floor"`
	Operations   []apiOperation `json:"operations"`
	Approval     *apiApproval   `json:"approval"`
	FinalMessage *string        `json:"final_message"`
	// Children, of a request, are its child runs' snapshots, in family
	// order, read in the same transaction as the parent's.
	Children []apiChildSnapshot `json:"children,omitempty"`
	// FamilyCursor, of a request, is the family cursor this snapshot
	// covers (each run's covering_seq, the parent's first, joined by
	// dots): its stream's ?after= to go on from here.
	FamilyCursor string `json:"family_cursor,omitempty"`
}

// apiStatusSnapshot is GET /api/runs/{id} for status-only access: the
// run's state and outcome, nothing of its history.
type apiStatusSnapshot struct {
	Access       string         `json:"access"`
	Run          apiStatusOfRun `json:"run"`
	FinalMessage *string        `json:"final_message"`
	// Children, of a request, are its child runs' states and outcomes,
	// in family order: whoever may see the parent sees its children.
	Children []apiStatusSnapshot `json:"children,omitempty"`
}

type apiStatusOfRun struct {
	ID    uuid.UUID `json:"id"`
	State string    `json:"state"`
}

// newAPISnapshot shapes a snapshot for what the user may see of it, its
// final message in l (a human field: Accept-Language decides it).
func newAPISnapshot(s *store.Snapshot, access Access, l views.Lang) any {
	var final *string
	if s.FinalMessage != nil {
		text := s.FinalMessage.In.Or(l.Tag.String(), s.FinalMessage.Body)
		final = &text
	}
	if access != AccessFull {
		return apiStatusSnapshot{Access: "status", Run: apiStatusOfRun{ID: s.Run.ID, State: s.Run.State}, FinalMessage: final}
	}
	out := apiSnapshot{Access: "full", Run: newAPIRun(s.Run), CoveringSeq: s.CoveringSeq, ReplayFloor: s.ReplayFloor,
		Operations: make([]apiOperation, 0, len(s.Operations)), FinalMessage: final}
	for _, op := range s.Operations {
		o := apiOperation{ID: op.ID, Kind: op.Kind, State: op.State, Amount: op.Amount, Currency: op.Currency,
			CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
		if op.ProviderRef.Valid {
			o.ProviderRef = &op.ProviderRef.String
		}
		out.Operations = append(out.Operations, o)
	}
	if a := s.Approval; a != nil {
		ap := apiApproval{RequestedAt: a.RequestedAt}
		if a.Deadline.Valid {
			ap.Deadline = &a.Deadline.Time
		}
		if a.Decision.Valid {
			ap.Decision = &a.Decision.String
		}
		if a.DecidedBy.Valid {
			ap.DecidedBy = &a.DecidedBy.Int64
		}
		if a.DecidedAt.Valid {
			ap.DecidedAt = &a.DecidedAt.Time
		}
		out.Approval = &ap
	}
	return out
}

// apiListOrders is GET /api/orders: the caller's orders.
func (h *Handler) apiListOrders(c echo.Context) error {
	orders, err := h.store.OrdersByCustomer(c.Request().Context(), currentUser(c).ID)
	if err != nil {
		return err
	}
	out := make([]apiOrder, 0, len(orders))
	for _, o := range orders {
		out = append(out, apiOrder{ID: o.ID, Description: o.Description, Amount: o.Amount, Currency: o.Currency, Refundable: o.Refundable})
	}
	return c.JSON(http.StatusOK, out)
}

// apiStartBody is the body of POST /api/runs: one order's refund
// (order_id and amount, in minor units), or several (refunds), which
// start a family: a parent run and a child run per order. With retry_of,
// it asks again for that run, copying what the body does not give
// (again.go).
type apiStartBody struct {
	OrderID int64              `json:"order_id"`
	Amount  int64              `json:"amount"`
	Refunds []store.RefundItem `json:"refunds"`
	Reason  string             `json:"reason"`
	RetryOf *string            `json:"retry_of"`
}

// DefaultMaxFamilySize is MAX_FAMILY_SIZE's default.
const DefaultMaxFamilySize = 20

// apiStartRun is POST /api/runs: 201 with the run it started, or 200 with
// the run the same Idempotency-Key already started.
func (h *Handler) apiStartRun(c echo.Context) error {
	u := currentUser(c)
	if !mayStartRefunds(u) {
		return errMayNotStart
	}
	key := strings.TrimSpace(c.Request().Header.Get("Idempotency-Key"))
	if key == "" {
		return apiBadRequest(c, codeMissingIdempotencyKey, "api.missing_idempotency_key")
	}
	var body apiStartBody
	if bad := decodeJSON(c.Request().Body, &body); bad != nil {
		return writeBad(c, bad)
	}
	if body.RetryOf != nil {
		return h.apiAskAgain(c, u, key, body)
	}
	if body.Refunds != nil {
		return h.apiStartFamily(c, u, key, body)
	}
	run, created, err := h.store.StartRun(c.Request().Context(), store.StartRequest{
		OwnerID: u.ID, ClientRequestID: key, OrderID: body.OrderID, Amount: body.Amount, Reason: body.Reason,
		RatePerMinute: h.cfg.StartRatePerUser, Language: langOf(c).Tag.String(),
	})
	if err != nil {
		return err
	}
	return apiStarted(c, run, created)
}

// apiStarted answers a single run's start: 201 with the run it started, or
// 200 with the one the key already had.
func apiStarted(c echo.Context, run *store.Run, created bool) error {
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/api/runs/"+run.ID.String())
	}
	return c.JSON(status, newAPIRun(run))
}

// apiStartFamily is POST /api/runs with refunds: 201 with the family's
// parent and its children, or 200 with the family the key already started.
func (h *Handler) apiStartFamily(c echo.Context, u *store.User, key string, body apiStartBody) error {
	if body.OrderID != 0 || body.Amount != 0 {
		return apiBadRequest(c, codeInvalidJSON, "api.one_or_several")
	}
	fam, created, err := h.store.StartFamily(c.Request().Context(), store.FamilyRequest{
		OwnerID: u.ID, ClientRequestID: key, Refunds: body.Refunds, Reason: body.Reason,
		MaxChildren: cmp.Or(h.cfg.MaxFamilySize, DefaultMaxFamilySize), RatePerMinute: h.cfg.StartRatePerUser,
		Language: langOf(c).Tag.String(),
	})
	if err != nil {
		return err
	}
	return apiStartedFamily(c, fam, created)
}

// apiStartedFamily answers a family's start: 201 with the parent and its
// children, each with its covering seq, or 200 with the family the key
// already had.
func apiStartedFamily(c echo.Context, fam *store.Family, created bool) error {
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/api/runs/"+fam.Parent.ID.String())
	}
	out := newAPIRun(fam.Parent)
	out.CoveringSeq = &fam.Parent.LastSeq
	out.Children = make([]apiRun, len(fam.Children))
	for i := range fam.Children {
		out.Children[i] = newAPIRun(&fam.Children[i])
		out.Children[i].CoveringSeq = &fam.Children[i].LastSeq
	}
	return c.JSON(status, out)
}

// badBody is a request body that cannot be read: the answer to send
// instead of calling the store. Its message is words, the English of its
// catalogue key; a viewer reads them in their language.
type badBody struct {
	status        int
	code, message string
	words         *store.Error
}

// refuseBody is a badBody whose words are the catalogue's key filled in
// with data.
func refuseBody(status int, code, key string, data map[string]any) *badBody {
	w := store.Refuse(code, key, data)
	return &badBody{status: status, code: code, message: w.Message, words: w}
}

// writeBad answers bad as the API's error JSON, in the viewer's language.
func writeBad(c echo.Context, bad *badBody) error {
	return c.JSON(bad.status, apiError{Error: apiErrorBody{Code: bad.code, Message: viewerLang(c).Refusal(bad.words)}})
}

// Error makes a badBody the error the gate (body.go) refuses a request
// with; problemFor shows it with its own status, code and words.
func (b *badBody) Error() string { return b.code + ": " + b.message }

func invalidJSON(key string, data map[string]any) *badBody {
	return refuseBody(http.StatusBadRequest, codeInvalidJSON, key, data)
}

// decodeJSON reads exactly one JSON object into v, a pointer to a struct.
// It says what is wrong with the body, or nil when it was read.
// jsonSpace is the white space JSON allows between values.
const jsonSpace = " \t\r\n"

func decodeJSON(r io.Reader, v any) *badBody {
	data, err := io.ReadAll(r)
	switch {
	case tooLarge(err):
		return refuseBody(http.StatusRequestEntityTooLarge, codeBodyTooLarge, "api.body_too_large", nil)
	case err != nil:
		return invalidJSON("api.body_unreadable", nil)
	case !utf8.Valid(data):
		// encoding/json would quietly replace the bad bytes.
		return invalidJSON("api.body_not_utf8", nil)
	}
	if trimmed := bytes.TrimLeft(data, jsonSpace); len(trimmed) > 0 && trimmed[0] != '{' {
		// null, an array or a bare value is not the object the API takes.
		return invalidJSON("api.body_not_object", nil)
	}
	if bad := strictKeys(data, v); bad != nil {
		return bad
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// A misspelt field is a mistake to report, not a field to ignore.
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return invalidJSON("api.body_empty", nil)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidJSON("api.field_wrong_type", map[string]any{"Field": typeErr.Field, "Expected": expected(typeErr.Type.Kind().String())})
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field"):
		return invalidJSON("api.unknown_field_json", map[string]any{"Field": strings.TrimPrefix(err.Error(), "json: unknown field ")})
	case err != nil:
		return invalidJSON("api.body_not_object", nil)
	}
	// Only white space may follow the object (dec.More stops at a stray
	// "}" or "]", so it cannot tell).
	if len(bytes.TrimLeft(data[dec.InputOffset():], jsonSpace)) > 0 {
		return invalidJSON("api.body_two_values", nil)
	}
	return nil
}

// tooLarge reports whether reading a body failed because it passed the
// limit. A body without a Content-Length (chunked) is found too large only
// while it is read: echo's body limit then fails the read with its 413,
// net/http's MaxBytesReader with *http.MaxBytesError.
func tooLarge(err error) bool {
	var maxErr *http.MaxBytesError
	var he *echo.HTTPError
	return errors.As(err, &maxErr) || (errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge)
}

// strictKeys says what is wrong with the keys of data's top-level object,
// or nil when nothing is. encoding/json matches keys ignoring case and lets
// the last duplicate win, so {"AMOUNT":1,"amount":2} would mean 2: every
// key must name a field of v exactly, once. Data that is no object is left
// for Decode to report.
func strictKeys(data []byte, v any) *badBody {
	fields := jsonFields(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		switch {
		case seen[key]:
			return invalidJSON("api.field_twice", map[string]any{"Field": strconv.Quote(key)})
		case !slices.Contains(fields, key):
			for _, f := range fields {
				if strings.EqualFold(f, key) {
					return invalidJSON("api.unknown_field_case", map[string]any{"Field": strconv.Quote(key), "Like": strconv.Quote(f)})
				}
			}
			return invalidJSON("api.unknown_field", map[string]any{"Field": strconv.Quote(key)})
		}
		seen[key] = true
		if err := dec.Decode(&json.RawMessage{}); err != nil {
			return nil
		}
	}
	return nil
}

// jsonFields are the names the fields of struct type t have in JSON. The
// API's bodies are flat: no embedded structs.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

func expected(kind string) *store.Error {
	switch kind {
	case "int64":
		return store.Refuse(codeInvalidJSON, "api.expected_integer", nil)
	case "string":
		return store.Refuse(codeInvalidJSON, "api.expected_string", nil)
	}
	return store.Refuse(codeInvalidJSON, "api.expected", map[string]any{"Kind": kind})
}

// apiShowRun is GET /api/runs/{id}: the run's snapshot, as much of it as
// the caller may see. It shows no events, so it reads none: its cost does
// not grow with the run's log.
func (h *Handler) apiShowRun(c echo.Context) error {
	run, access, err := h.loadRun(c)
	if err != nil {
		return err
	}
	if run.IsParent() {
		fam, err := h.store.SnapshotFamily(c.Request().Context(), run.ID)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, newAPIFamilySnapshot(fam, access, viewerLang(c)))
	}
	snap, err := h.store.SnapshotState(c.Request().Context(), run.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newAPISnapshot(snap, access, viewerLang(c)))
}

// apiChildSnapshot is a child's snapshot in its request's: the child's
// own snapshot, with what names it (id, state, order and amount) on top,
// as a list of the children reads them.
type apiChildSnapshot struct {
	ID       uuid.UUID `json:"id"`
	State    string    `json:"state"`
	OrderID  int64     `json:"order_id"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	apiSnapshot
}

// newAPIFamilySnapshot is a request's snapshot with its children's, for
// what the user may see of the family (the parent's access is the family's).
func newAPIFamilySnapshot(fam *store.FamilySnapshot, access Access, l views.Lang) any {
	out := newAPISnapshot(fam.Parent, access, l)
	full, ok := out.(apiSnapshot)
	if !ok {
		status := out.(apiStatusSnapshot)
		for _, c := range fam.Children {
			status.Children = append(status.Children, newAPISnapshot(c, access, l).(apiStatusSnapshot))
		}
		return status
	}
	full.Children = make([]apiChildSnapshot, 0, len(fam.Children))
	cursor := []string{strconv.FormatInt(full.CoveringSeq, 10)}
	for _, c := range fam.Children {
		if child, ok := newAPISnapshot(c, access, l).(apiSnapshot); ok {
			full.Children = append(full.Children, apiChildSnapshot{ID: c.Run.ID, State: c.Run.State,
				OrderID: c.Run.OrderID, Amount: c.Run.Amount, Currency: c.Run.Currency, apiSnapshot: child})
			cursor = append(cursor, strconv.FormatInt(child.CoveringSeq, 10))
		}
	}
	full.FamilyCursor = strings.Join(cursor, ".")
	return full
}

// apiRunsPage is GET /api/runs: a page of the caller's runs, newest first.
// next is the after= of the following page, null on the last one.
type apiRunsPage struct {
	Runs  []any   `json:"runs"`
	Next  *string `json:"next"`
	Limit int     `json:"limit"`
}

// apiListRuns is GET /api/runs?after=ID&limit=N: the runs the caller may
// see, by the same rules as a run's page: customers their own (status only
// without refund_access), approvers their own and every run that asked for
// an approval, support every run. A run the caller sees status-only is
// listed with its id and state alone.
func (h *Handler) apiListRuns(c echo.Context) error {
	u := currentUser(c)
	limit, ok := h.pageLimit(c.QueryParam("limit"))
	if !ok {
		return apiBadRequest(c, "invalid_limit", "api.invalid_limit")
	}
	q := store.RunList{OwnerID: u.ID, All: u.Role == store.RoleSupport,
		WithApprovals: u.Role == store.RoleApprover, Limit: limit + 1}
	if raw := c.QueryParam("after"); raw != "" {
		var err error
		if q.After, err = uuid.Parse(raw); err != nil {
			return apiBadRequest(c, store.CodeCursorInvalid, "api.invalid_after")
		}
	}
	page := apiRunsPage{Runs: []any{}, Limit: limit}
	if u.Role == store.RoleAdmin {
		// Admins manage people, not refunds: no run is theirs to see.
		return c.JSON(http.StatusOK, page)
	}
	runs, err := h.store.ListRuns(c.Request().Context(), q)
	if err != nil {
		return err
	}
	if len(runs) > limit {
		runs = runs[:limit]
		next := runs[limit-1].ID.String()
		page.Next = &next
	}
	for i := range runs {
		switch h.accessTo(u, &runs[i].Run, runs[i].HasApproval) {
		case AccessFull:
			page.Runs = append(page.Runs, newAPIRun(&runs[i].Run))
		case AccessStatus:
			page.Runs = append(page.Runs, apiStatusOfRun{ID: runs[i].ID, State: runs[i].State})
		}
	}
	return c.JSON(http.StatusOK, page)
}

// pageLimit reads a list's limit: a positive integer, at most the
// APIPageLimit setting (a larger one is lowered to it); empty is half of
// it. ok is false when raw is no positive integer.
func (h *Handler) pageLimit(raw string) (limit int, ok bool) {
	if raw == "" {
		return max(h.cfg.APIPageLimit/2, 1), true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n <= 0 {
		return 0, false
	}
	return min(n, h.cfg.APIPageLimit), true
}

package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
)

// Codes of API requests that cannot be read.
const (
	codeMissingIdempotencyKey = "missing_idempotency_key"
	codeInvalidJSON           = "invalid_json"
)

// apiBadRequest is a 400 with its own code: the request could not be read,
// so no store call was made.
func apiBadRequest(c echo.Context, code, msg string) error {
	return c.JSON(http.StatusBadRequest, apiError{Error: apiErrorBody{Code: code, Message: msg}})
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
	ID              uuid.UUID  `json:"id"`
	State           string     `json:"state"`
	OrderID         int64      `json:"order_id"`
	Amount          int64      `json:"amount"`
	Currency        string     `json:"currency"`
	Reason          string     `json:"reason"`
	CancelRequested bool       `json:"cancel_requested"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	FinishedAt      *time.Time `json:"finished_at"`
}

func newAPIRun(r *store.Run) apiRun {
	out := apiRun{ID: r.ID, State: r.State, OrderID: r.OrderID, Amount: r.Amount, Currency: r.Currency,
		Reason: r.Reason, CancelRequested: r.CancelRequested(), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
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
}

// apiStatusSnapshot is GET /api/runs/{id} for status-only access: the
// run's state and outcome, nothing of its history.
type apiStatusSnapshot struct {
	Access       string         `json:"access"`
	Run          apiStatusOfRun `json:"run"`
	FinalMessage *string        `json:"final_message"`
}

type apiStatusOfRun struct {
	ID    uuid.UUID `json:"id"`
	State string    `json:"state"`
}

// newAPISnapshot shapes a snapshot for what the user may see of it.
func newAPISnapshot(s *store.Snapshot, access Access) any {
	var final *string
	if s.FinalMessage != nil {
		final = &s.FinalMessage.Body
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

// apiStartBody is the body of POST /api/runs. Amount is in minor units.
type apiStartBody struct {
	OrderID int64  `json:"order_id"`
	Amount  int64  `json:"amount"`
	Reason  string `json:"reason"`
}

// apiStartRun is POST /api/runs: 201 with the run it started, or 200 with
// the run the same Idempotency-Key already started.
func (h *Handler) apiStartRun(c echo.Context) error {
	u := currentUser(c)
	if !mayStartRefunds(u) {
		return errMayNotStart
	}
	key := strings.TrimSpace(c.Request().Header.Get("Idempotency-Key"))
	if key == "" {
		return apiBadRequest(c, codeMissingIdempotencyKey, "Send an Idempotency-Key header: the same key returns the run it already started.")
	}
	var body apiStartBody
	if msg := decodeJSON(c.Request().Body, &body); msg != "" {
		return apiBadRequest(c, codeInvalidJSON, msg)
	}
	run, created, err := h.store.StartRun(c.Request().Context(), store.StartRequest{
		OwnerID: u.ID, ClientRequestID: key, OrderID: body.OrderID, Amount: body.Amount, Reason: body.Reason,
	})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/api/runs/"+run.ID.String())
	}
	return c.JSON(status, newAPIRun(run))
}

// decodeJSON reads exactly one JSON object into v. It returns what is wrong
// with the body in words, or "" when it was read.
func decodeJSON(r io.Reader, v any) string {
	dec := json.NewDecoder(r)
	// A misspelt field is a mistake to report, not a field to ignore.
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "The body is empty: send a JSON object."
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return "The field " + typeErr.Field + " has the wrong type: " + expected(typeErr.Type.Kind().String()) + "."
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field"):
		return "The body has an unknown field: " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "."
	case err != nil:
		return "The body is not a valid JSON object."
	}
	if dec.More() {
		return "The body has more than one JSON value."
	}
	return ""
}

func expected(kind string) string {
	switch kind {
	case "int64":
		return "expected an integer (amounts are in minor units, 1250 for 12.50)"
	case "string":
		return "expected a string"
	}
	return "expected " + kind
}

// apiShowRun is GET /api/runs/{id}: the run's snapshot, as much of it as
// the caller may see.
func (h *Handler) apiShowRun(c echo.Context) error {
	run, access, err := h.loadRun(c)
	if err != nil {
		return err
	}
	snap, err := h.store.Snapshot(c.Request().Context(), run.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newAPISnapshot(snap, access))
}

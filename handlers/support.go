package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// supportPageSize is how many runs one page of support's search shows.
const supportPageSize = 25

// familyReadLimit bounds the runs read of one family: far above any
// MAX_FAMILY_SIZE, whatever it was when the family was made.
const familyReadLimit = 1000

// showSupportRuns is support's read-only search over every run: by run ID,
// by part of the customer's email, by state; newest first, a page at a time.
func (h *Handler) showSupportRuns(c echo.Context) error {
	u := currentUser(c)
	if u.Role != store.RoleSupport {
		return store.Refuse(store.CodeForbidden, "refuse.support_search", nil)
	}
	q := views.SupportSearch{Query: strings.TrimSpace(c.QueryParam("q")), State: c.QueryParam("state"), Page: 1, Per: supportPageSize}
	status := http.StatusOK
	if p := c.QueryParam("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err := outOfRange("page", err); err != nil {
			return err
		}
		if err != nil || n < 1 {
			q.Error = "There is no page " + strconv.Quote(p) + ": pages are numbered from 1."
			status = http.StatusUnprocessableEntity
		} else {
			q.Page = n
		}
	}
	f := store.RunFilter{Limit: supportPageSize}
	if id, err := uuid.Parse(q.Query); err == nil {
		// Any ID of a family (a run's, or the correlation ID, its root's)
		// finds the whole family; a run of its own is its own family.
		f.Family = id
	} else {
		f.OwnerEmail = q.Query
	}
	if q.State != "" && !slices.Contains(store.States, q.State) {
		q.Error = "There is no run state called " + q.State + "."
		q.State = ""
		status = http.StatusUnprocessableEntity
	}
	f.State = q.State
	ctx := c.Request().Context()
	var err error
	if q.Total, err = h.store.CountRuns(ctx, f); err != nil {
		return err
	}
	// A page past the end shows the last one.
	q.Page = max(1, min(q.Page, (q.Total+supportPageSize-1)/supportPageSize))
	f.Offset = (q.Page - 1) * supportPageSize
	runs, err := h.store.SearchRuns(ctx, f)
	if err != nil {
		return err
	}
	return render(c, status, views.SupportRunsPage(u, q, store.States, runs))
}

// supportSnapshot loads the run of the :id path parameter for support: one
// consistent snapshot and the people its log names. Anyone but support
// gets the 404 of a run that does not exist.
func (h *Handler) supportSnapshot(c echo.Context) (*views.SupportRun, error) {
	run, access, err := h.loadRun(c)
	if err != nil {
		return nil, err
	}
	if access != AccessFull || currentUser(c).Role != store.RoleSupport {
		return nil, store.ErrNotFound
	}
	ctx := c.Request().Context()
	snap, err := h.store.Snapshot(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	people, err := h.store.UsersByID(ctx, views.SupportActorIDs(snap))
	if err != nil {
		return nil, err
	}
	d := views.NewSupportRun(snap, people)
	if d.Retries, err = h.store.RetriesOf(ctx, snap.Run); err != nil {
		return nil, err
	}
	if snap.Run.IsParent() || snap.Run.ParentRunID.Valid {
		// The parent and every child, each as the search lists it.
		f := store.RunFilter{Family: snap.Run.ID, Limit: familyReadLimit}
		if d.Family, err = h.store.SearchRuns(ctx, f); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// showSupportRun is support's page of one run: timeline with who acted,
// the operation ledger, where the stored history begins.
func (h *Handler) showSupportRun(c echo.Context) error {
	d, err := h.supportSnapshot(c)
	if err != nil {
		return err
	}
	if d.Deliveries, err = h.store.RunDeliveries(c.Request().Context(), d.Snap.Run.ID); err != nil {
		return err
	}
	if d.Mails, err = h.store.MailsOfRun(c.Request().Context(), d.Snap.Run.ID); err != nil {
		return err
	}
	return render(c, http.StatusOK, views.SupportRunPage(currentUser(c), d))
}

// supportExport is the run as support downloads it: the API's snapshot,
// the ledger with every call made to the provider and its last problem,
// and every stored event (decisions carry who made them and the reason).
type supportExport struct {
	apiSnapshot
	Ledger     []supportLedgerEntry `json:"ledger"`
	Events     []store.Event        `json:"events"`
	ExportedAt time.Time            `json:"exported_at"`
}

type supportLedgerEntry struct {
	ID          uuid.UUID     `json:"id"`
	State       string        `json:"state"`
	Calls       []supportCall `json:"calls"`
	LastError   string        `json:"last_error"`
	ProviderRef *string       `json:"provider_ref"`
}

// supportCall is one call made to the provider: http_status and
// duration_ms are null when no answer was read, or the call never ended.
type supportCall struct {
	Kind       string    `json:"kind"`
	StartedAt  time.Time `json:"started_at"`
	Ended      bool      `json:"ended"`
	HTTPStatus *int64    `json:"http_status"`
	DurationMS *float64  `json:"duration_ms"`
	Result     string    `json:"result"`
}

func newSupportCall(c store.ProviderCall) supportCall {
	out := supportCall{Kind: c.Kind, StartedAt: c.StartedAt.UTC(), Ended: c.Ended, Result: c.Result}
	if c.HTTPStatus.Valid {
		out.HTTPStatus = &c.HTTPStatus.Int64
	}
	if c.DurationUS.Valid {
		ms := float64(c.DurationUS.Int64) / 1000
		out.DurationMS = &ms
	}
	return out
}

// exportRun is "Download JSON": the run, its ledger and its stored log as
// an attachment.
func (h *Handler) exportRun(c echo.Context) error {
	d, err := h.supportSnapshot(c)
	if err != nil {
		return err
	}
	snap := d.Snap
	out := supportExport{Events: snap.Events, ExportedAt: time.Now().UTC(), Ledger: []supportLedgerEntry{}}
	api, ok := newAPISnapshot(snap, AccessFull, views.English).(apiSnapshot)
	if !ok {
		return fmt.Errorf("handlers: export run: the full snapshot is a %T", newAPISnapshot(snap, AccessFull, views.English))
	}
	out.apiSnapshot = api
	for _, op := range snap.Operations {
		e := supportLedgerEntry{ID: op.ID, State: op.State, LastError: op.LastError, Calls: []supportCall{}}
		for _, c := range snap.Calls {
			if c.OperationID == op.ID {
				e.Calls = append(e.Calls, newSupportCall(c))
			}
		}
		if op.ProviderRef.Valid {
			e.ProviderRef = &op.ProviderRef.String
		}
		out.Ledger = append(out.Ledger, e)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, `attachment; filename="run-`+snap.Run.ID.String()+`.json"`)
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

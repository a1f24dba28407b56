package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// SupportRun is support's view of one run: the whole stored log with who
// did what, the operation ledger with every call about each operation, and
// where the stored history begins. It is built from one snapshot.
type SupportRun struct {
	Snap *store.Snapshot
	// People are the users the log names (the owner, approvers, whoever
	// canceled), by ID.
	People map[int64]store.User
	// Rows are the log as support reads it: business events one by one,
	// each stretch of narration as one row.
	Rows []SupportRow
	// Family is the run's family when it has one (it is a request, or one
	// of a request's refunds): the parent first, then its children in
	// order. Nil for a run of its own.
	Family []store.RunListing
	// Retries are the run's chain of asking again, if it has one.
	Retries *store.Retries
	// Deliveries are the run's business events on their way to each
	// webhook endpoint (support's page only; the export leaves them out).
	Deliveries []store.RunDelivery
	// Mails are the emails of the run's request (the mail ledger, kept by
	// the root run), support's page only.
	Mails []store.Mail
}

// familyParent is the family's parent (the request), nil when the family
// was not read whole.
func (d *SupportRun) familyParent() *store.RunListing {
	if len(d.Family) == 0 || !d.Family[0].IsParent() {
		return nil
	}
	return &d.Family[0]
}

// familyTitle names a request in support's tree, in l: its orders and
// total.
func familyTitle(l Lang, p *store.RunListing, children int) string {
	return l.T("support.family.request", map[string]any{"Count": children, "Amount": l.Money(p.Amount, p.Currency)})
}

// familyChild names one refund of a request in support's tree, in l.
func familyChild(l Lang, ch *store.RunListing) string {
	return l.T("support.family.child", map[string]any{"Order": ch.OrderID, "Item": ch.Item, "Amount": l.Money(ch.Amount, ch.Currency)})
}

// supportTitle is the heading of support's page of a run, in l.
func (d *SupportRun) supportTitle(l Lang) string {
	r := d.Snap.Run
	if r.IsParent() {
		return l.T("support.run.title_request", map[string]any{"Amount": l.Money(r.Amount, r.Currency), "Count": len(d.Family) - 1})
	}
	return l.T("support.run.title_refund", map[string]any{"Amount": l.Money(r.Amount, r.Currency), "Order": r.OrderID})
}

// FamilyRunID is the element ID of a run in support's family tree.
func FamilyRunID(id uuid.UUID) string { return "family-run-" + id.String() }

// SupportRow is one row of support's timeline. Who acted and what
// happened are said in the page's language when it is drawn (actor, text).
type SupportRow struct {
	At       time.Time
	Seq      int64
	LastSeq  int64 // the last seq a narration stretch covers; Seq otherwise
	Class    string
	Type     string
	Event    store.Event // the business event; narration's first piece
	Reason   bool        // the text ends with the reason given with a decision
	Chunks   int         // narration pieces in the stretch
	Sample   string      // the stretch's text, shortened
	Narrated bool
}

// sampleLen bounds the narration shown in one timeline row; the JSON
// download holds all of it.
const sampleLen = 160

// NewSupportRun shapes snap for support; people holds the users the log's
// events name (store.UsersByID of SupportActorIDs).
func NewSupportRun(snap *store.Snapshot, people map[int64]store.User) *SupportRun {
	d := &SupportRun{Snap: snap, People: people}
	for _, ev := range snap.Events {
		if ev.Type == store.EventNarrationDelta {
			n := len(d.Rows)
			if n > 0 && d.Rows[n-1].Narrated && d.Rows[n-1].LastSeq == ev.Seq-1 {
				r := &d.Rows[n-1]
				r.LastSeq, r.Chunks = ev.Seq, r.Chunks+1
				r.Sample = shorten(r.Sample + NarrationText(ev))
				continue
			}
			d.Rows = append(d.Rows, SupportRow{At: ev.CreatedAt, Seq: ev.Seq, LastSeq: ev.Seq, Class: ev.Class, Type: ev.Type,
				Event: ev, Chunks: 1, Sample: shorten(NarrationText(ev)), Narrated: true})
			continue
		}
		d.Rows = append(d.Rows, SupportRow{At: ev.CreatedAt, Seq: ev.Seq, LastSeq: ev.Seq, Class: ev.Class, Type: ev.Type,
			Event: ev, Reason: true})
	}
	return d
}

// actor says who acted in row r, in l: the agent narrates.
func (d *SupportRun) actor(r SupportRow, l Lang) string {
	if r.Narrated {
		return l.T("support.actor.agent")
	}
	return d.actorOf(r.Event, l)
}

// text says what happened in row r, in l, with the reason given with a
// decision as staff read it.
func (r SupportRow) text(l Lang) string {
	s := EventTextIn(r.Event, l)
	if dc := store.DeciderOf(r.Event); dc != nil && r.Reason {
		s += ReasonSuffixIn(dc.Reason, l)
	}
	return s
}

// classWords is an event's class as l names it.
func classWords(l Lang, class string) string {
	if key := "support.class." + class; l.has(key) {
		return l.T(key)
	}
	return class
}

// callsOf are the calls made to the provider about operation id, oldest
// first.
func (d *SupportRun) callsOf(id uuid.UUID) []store.ProviderCall {
	var out []store.ProviderCall
	for _, c := range d.Snap.Calls {
		if c.OperationID == id {
			out = append(out, c)
		}
	}
	return out
}

func callKind(l Lang, kind string) string {
	if kind == store.CallSubmit {
		return l.T("support.call.submit")
	}
	return l.T("support.call.lookup")
}

// callStatus is a call's HTTP status, or why it has none, in l.
func callStatus(l Lang, c store.ProviderCall) string {
	switch {
	case !c.Ended:
		return l.T("support.call.no_answer_recorded")
	case !c.HTTPStatus.Valid:
		return l.T("support.call.no_answer")
	}
	return strconv.FormatInt(c.HTTPStatus.Int64, 10)
}

// callStatusAttr is callStatus for a data attribute: the status, or "none".
func callStatusAttr(c store.ProviderCall) string {
	if c.HTTPStatus.Valid {
		return strconv.FormatInt(c.HTTPStatus.Int64, 10)
	}
	return "none"
}

func callTook(l Lang, c store.ProviderCall) string {
	if !c.Ended {
		return "—"
	}
	took := c.Duration().Round(time.Millisecond)
	return l.T("support.call.took_value", map[string]any{"Took": took.String(), "MS": took.Milliseconds()})
}

func shorten(s string) string {
	if r := []rune(s); len(r) > sampleLen {
		return string(r[:sampleLen-1]) + "…"
	}
	return s
}

// SupportActorIDs are the users snap's events name, for NewSupportRun.
func SupportActorIDs(snap *store.Snapshot) []int64 {
	ids := []int64{snap.Run.OwnerID}
	for _, ev := range snap.Events {
		if id, ok := byUser(ev); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// byUser is the user a decision event says decided.
func byUser(ev store.Event) (int64, bool) {
	if d := store.DeciderOf(ev); d != nil && d.UserID > 0 {
		return d.UserID, true
	}
	return 0, false
}

// actorOf says who acted in an event, as staff read it in l: a person by
// name and role, the system (the approval policy), the agent or the
// payment provider.
func (d *SupportRun) actorOf(ev store.Event, l Lang) string {
	if id, ok := byUser(ev); ok {
		return d.person(id, l)
	}
	switch ev.Type {
	case store.EventRunCreated:
		return d.person(d.Snap.Run.OwnerID, l)
	case store.EventApprovalGranted:
		if d := store.DeciderOf(ev); d != nil && d.System {
			return l.T("support.actor.system") // as who names the approval policy (words.go)
		}
		return l.T("support.actor.approver")
	case store.EventCancelRequested:
		return l.T("support.actor.someone")
	case store.EventApprovalExpired:
		return l.T("support.actor.system") // the deadline, no person
	case store.EventOperationSucceeded, store.EventOperationFailed:
		return l.T("support.actor.provider")
	}
	return l.T("support.actor.agent")
}

// person names a user as "Name (role)" in l, or by ID if they are gone.
func (d *SupportRun) person(id int64, l Lang) string {
	if u, ok := d.People[id]; ok {
		return l.T("support.person", map[string]any{"Name": u.Name, "Role": roleWords(l, u.Role)})
	}
	return l.T("support.user_id", map[string]any{"ID": id})
}

// words is the run in the signed-in staff member's words (Words); of a
// request, its status is the request's (requestStatus, as its page and
// the lists say it) and its outcome its final answer, never the words of
// a single refund applied to the sum of its refunds.
func (d *SupportRun) words(u *store.User, l Lang) Said {
	p := store.ProgressOf(d.Snap)
	if parent := d.familyParent(); parent != nil {
		w := Said{Answer: strings.TrimSpace(p.FinalMessage)}
		w.Status, w.Tone = requestListWords(*parent, l)
		return w
	}
	return Words(&p, Viewer{UserID: u.ID, Staff: true, Lang: l})
}

// outcome names how the run ended, "" while it goes on.
func (d *SupportRun) outcome() string {
	p := store.ProgressOf(d.Snap)
	return p.Outcome()
}

// customer names the run's owner with their email.
func (d *SupportRun) customer(l Lang) string {
	if u, ok := d.People[d.Snap.Run.OwnerID]; ok {
		return u.Name + " <" + u.Email + ">"
	}
	return d.person(d.Snap.Run.OwnerID, l)
}

// ledgerEvents are the log's events about operation id, in order: the
// submission, each "verifying" and the verified outcome.
func (d *SupportRun) ledgerEvents(id uuid.UUID) []SupportRow {
	var out []SupportRow
	for _, ev := range d.Snap.Events {
		if n, ok := store.OperationNewsOf(ev); ok && n.OperationID == id {
			out = append(out, SupportRow{At: ev.CreatedAt, Seq: ev.Seq, LastSeq: ev.Seq, Class: ev.Class, Type: ev.Type, Event: ev})
		}
	}
	return out
}

// firstNarration is the seq of the oldest narration still stored, 0 if none.
func (d *SupportRun) firstNarration() int64 {
	for _, r := range d.Rows {
		if r.Narrated {
			return r.Seq
		}
	}
	return 0
}

// shortID tells runs apart in a list: the end of the ID, since a UUIDv7
// begins with its creation time, which runs made together share.
func shortID(id uuid.UUID) string {
	s := id.String()
	return "…" + s[len(s)-8:]
}

// exportHref is where the run's JSON download lives.
func exportHref(id uuid.UUID) string { return "/support/runs/" + id.String() + "/export" }

// supportRunHref is support's page of a run.
func supportRunHref(id uuid.UUID) string { return "/support/runs/" + id.String() }

// stamp is a time as support reads it in l: date, time to the
// millisecond, zone.
func stamp(l Lang, t time.Time) string { return staffTime(l, t, "milli") }

// isoStamp is a time for a datetime attribute.
func isoStamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// seqRange is a row's seq, or its first–last for a narration stretch.
func (r SupportRow) seqRange() string {
	if r.LastSeq == r.Seq {
		return strconv.FormatInt(r.Seq, 10)
	}
	return strconv.FormatInt(r.Seq, 10) + "–" + strconv.FormatInt(r.LastSeq, 10)
}

// pageHref is the search's address at page p, with the same query.
func (q SupportSearch) pageHref(p int) string {
	v := url.Values{}
	if q.Query != "" {
		v.Set("q", q.Query)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if p > 1 {
		v.Set("page", strconv.Itoa(p))
	}
	if len(v) == 0 {
		return "/support/runs"
	}
	return "/support/runs?" + v.Encode()
}

// mailKindWords says what an email of the ledger is about, for support,
// in l.
func mailKindWords(l Lang, kind string) string {
	switch kind {
	case store.MailEnded, store.MailWaiting:
		return l.T("support.mail.kind." + kind)
	}
	return kind
}

// mailStateWords says where one email is: sent, refused for good (with
// the server's words), or still to be sent.
func mailStateWords(l Lang, m store.Mail) string {
	switch m.State {
	case "sent":
		if m.SentAt.Valid {
			return l.T("support.mail.sent_at", map[string]any{"At": staffTime(l, m.SentAt.Time, "second")})
		}
		return l.T("support.mail.sent")
	case "failed":
		return l.T("support.mail.refused", map[string]any{"Error": m.LastError.String})
	}
	if m.LastError.Valid {
		return l.T("support.mail.retrying", map[string]any{"Error": m.LastError.String, "Next": staffTime(l, m.NextAt, "second")})
	}
	return l.T("support.mail.pending")
}

// supportStateWords is a run state as support's search offers it, in l.
func supportStateWords(l Lang, state string) string {
	if key := "support.state." + state; l.has(key) {
		return l.T(key)
	}
	return stateWords(state)
}

// seqWords names a place in the log, in l ("seq 12"); seq is a number or
// a range's words.
func seqWords(l Lang, seq any) string { return l.T("support.seq", map[string]any{"Seq": seq}) }

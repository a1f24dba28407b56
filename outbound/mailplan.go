package outbound

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// MailPlanner says which emails a business event causes, worded by views
// as the pages word the same run, each in its recipient's language (store.FanOut records them in the mail
// ledger in its fan-out transaction):
//   - a request's end (the terminal event of its root run: for a request
//     of several orders the parent, which ends after its last child) sends
//     its owner one email, in the words of the run's page;
//   - a request's first wait for a decision (approval.requested of any of
//     its runs) sends each approver one email, keyed by the request's root
//     run, so the children's requests share it.
//
// The Message-ID is a function of the request, the kind and the person,
// so the ledger's UNIQUE (run_id, kind, recipient) and its primary key
// both keep one email per ending and per waiting request.
type MailPlanner struct {
	Store *store.Store
	// PublicURL is where people open refundd (the links in emails), with
	// no trailing slash: https://refunds.example.com.
	PublicURL string
}

var _ store.MailPlanner = (*MailPlanner)(nil)

// Plan is the emails ev causes: none, mostly.
func (p *MailPlanner) Plan(ctx context.Context, ev store.QueuedEvent) ([]store.NewMail, error) {
	switch ev.Type {
	case store.EventRunCompleted, store.EventRunFailed, store.EventRunCanceled:
		if ev.ParentRunID.Valid {
			return nil, nil // a child's end: its request's end tells it
		}
		return p.ended(ctx, ev.RunID)
	case store.EventApprovalRequested:
		return p.waiting(ctx, ev.CorrelationID)
	}
	return nil, nil
}

// ended is the email to a request's owner once its root run has ended.
func (p *MailPlanner) ended(ctx context.Context, rootID uuid.UUID) ([]store.NewMail, error) {
	run, err := p.Store.RunByID(ctx, rootID)
	if err != nil {
		return nil, fmt.Errorf("outbound: plan mail: %w", err)
	}
	owner, err := p.Store.UserByID(ctx, run.OwnerID)
	if err != nil {
		return nil, fmt.Errorf("outbound: plan mail: owner: %w", err)
	}
	// As the owner sees the run's page (handlers' viewerOf): their own
	// decisions read "you", in the language they saved, else the one they
	// asked in.
	viewer := views.Viewer{UserID: owner.ID, Staff: owner.Role != store.RoleCustomer, Lang: langOf(owner, run.Language)}
	var e views.Email
	if run.IsParent() {
		fs, err := p.Store.SnapshotFamily(ctx, rootID)
		if err != nil {
			return nil, fmt.Errorf("outbound: plan mail: %w", err)
		}
		e = views.RequestEndedEmail(views.NewFamilyView(fs, false, viewer), p.link(rootID))
	} else {
		snap, err := p.Store.SnapshotHead(ctx, rootID)
		if err != nil {
			return nil, fmt.Errorf("outbound: plan mail: %w", err)
		}
		e = views.EndedEmail(views.NewRunView(snap, false, viewer), p.link(rootID))
	}
	return []store.NewMail{p.mail(rootID, store.MailEnded, owner, e)}, nil
}

// waiting is the email to each approver when the request rootID asks for
// a decision: one per request and approver, always (refundd verify counts
// on it). A request decided by the time its event is fanned out is told
// as it stands (views.WaitingEmail), never as waiting.
func (p *MailPlanner) waiting(ctx context.Context, rootID uuid.UUID) ([]store.NewMail, error) {
	run, err := p.Store.RunByID(ctx, rootID)
	if err != nil {
		return nil, fmt.Errorf("outbound: plan mail: %w", err)
	}
	approvers, err := p.Store.Approvers(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbound: plan mail: %w", err)
	}
	word, err := p.waitingWords(ctx, run)
	if err != nil {
		return nil, err
	}
	var out []store.NewMail
	for i := range approvers {
		a := &approvers[i]
		if a.ID == run.OwnerID {
			continue // nobody decides their own refund
		}
		viewer := views.Viewer{UserID: a.ID, Staff: true, MayApprove: true, MayCancel: true, Lang: langOf(a, "")}
		out = append(out, p.mail(rootID, store.MailWaiting, a, word(viewer)))
	}
	return out, nil
}

// waitingWords reads the request once and words its waiting email for
// each viewer.
func (p *MailPlanner) waitingWords(ctx context.Context, run *store.Run) (func(views.Viewer) views.Email, error) {
	link := p.link(run.ID)
	if run.IsParent() {
		fs, err := p.Store.SnapshotFamily(ctx, run.ID)
		if err != nil {
			return nil, fmt.Errorf("outbound: plan mail: %w", err)
		}
		return func(v views.Viewer) views.Email {
			return views.RequestWaitingEmail(views.NewFamilyView(fs, false, v), link)
		}, nil
	}
	snap, err := p.Store.SnapshotHead(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("outbound: plan mail: %w", err)
	}
	return func(v views.Viewer) views.Email {
		return views.WaitingEmail(views.NewRunView(snap, false, v), link)
	}, nil
}

// langOf is the language of u's emails: the one they saved for the pages,
// else the one they asked in (asked: a run's language, for its owner),
// else English (an email answers no Accept-Language).
func langOf(u *store.User, asked string) views.Lang {
	return views.Catalogues.Choose(u.Language, asked) // asked, a tag, reads as an Accept-Language
}

// mail is the ledger's row of one email of kind about request rootID to u.
func (p *MailPlanner) mail(rootID uuid.UUID, kind string, u *store.User, e views.Email) store.NewMail {
	return store.NewMail{
		MessageID: MessageID(kind, rootID, u.ID, p.PublicURL),
		RunID:     rootID,
		Kind:      kind,
		UserID:    u.ID,
		Recipient: u.Email,
		Subject:   e.Subject,
		Body:      e.Body,
	}
}

// link is the request's page.
func (p *MailPlanner) link(rootID uuid.UUID) string {
	return strings.TrimRight(p.PublicURL, "/") + views.RunURL(rootID)
}

// MessageID is the Message-ID of the email of kind about request rootID
// to user userID: <kind.root.user@host>, host being publicURL's host name
// (refundd when it has none that a Message-ID may carry).
func MessageID(kind string, rootID uuid.UUID, userID int64, publicURL string) string {
	return "<" + kind + "." + rootID.String() + "." + strconv.FormatInt(userID, 10) + "@" + messageHost(publicURL) + ">"
}

// messageHost is the right side of a Message-ID: a dot-atom (RFC 5322).
func messageHost(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return "refundd"
	}
	h := u.Hostname()
	if h == "" || strings.Trim(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" ||
		strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") || strings.Contains(h, "..") {
		return "refundd"
	}
	return h
}

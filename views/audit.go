package views

import (
	"cmp"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
)

// AuditLine is an audit entry as a sentence: who, what, to whom. The
// subject links to its page when the viewer may open it.
type AuditLine struct {
	Actor       string
	Verb        string // between the actor and the subject
	Subject     string
	SubjectHref string
	Rest        string // after the subject, up to the full stop
}

// auditDetails are the details fields the sentences use.
type auditDetails struct {
	Grant  string `json:"grant"`
	From   string `json:"from"`
	To     string `json:"to"`
	Name   string `json:"name"`
	URL    string `json:"url"`  // a webhook endpoint's
	Type   string `json:"type"` // a resent delivery's event type
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
	Email  string `json:"email"`
}

// auditActionWords names each audit action in the filter.
var auditActionWords = map[string]string{
	store.AuditLogin:              "Logins",
	store.AuditLoginFailed:        "Failed logins",
	store.AuditGrantAdded:         "Permissions given",
	store.AuditGrantRemoved:       "Permissions taken away",
	store.AuditRoleChanged:        "Role changes",
	store.AuditUserDisabled:       "Accounts disabled",
	store.AuditUserEnabled:        "Accounts enabled",
	store.AuditTokenCreated:       "API tokens made",
	store.AuditTokenRevoked:       "API tokens revoked",
	store.AuditRunApproved:        "Refunds approved",
	store.AuditRunCancelRequested: "Cancels asked for",
	store.AuditWebhookCreated:     "Webhook endpoints added",
	store.AuditWebhookDeleted:     "Webhook endpoints deleted",
	store.AuditWebhookRotated:     "Webhook secrets rotated",
	store.AuditWebhookDisabled:    "Webhook endpoints disabled",
	store.AuditWebhookEnabled:     "Webhook endpoints enabled",
	store.AuditWebhookResent:      "Webhook deliveries sent again",
}

// GrantWords says what a grant lets its holder do.
func GrantWords(grant string) string {
	if grant == store.GrantRefundAccess {
		return "permission to request refunds"
	}
	return "the " + strings.ReplaceAll(grant, "_", " ") + " grant"
}

// auditWords turns e into a sentence for viewer.
func auditWords(e store.AuditEntry, viewer *store.User) AuditLine {
	var d auditDetails
	_ = json.Unmarshal(e.Details, &d) // the store wrote it; unreadable reads as empty
	l := AuditLine{Actor: "Someone not signed in"}
	if e.ActorName.Valid {
		l.Actor = e.ActorName.String + " (" + e.ActorRole.String + ")"
	}
	l.Subject, l.SubjectHref = auditSubject(e, viewer)
	switch e.Action {
	case store.AuditLogin:
		l.Verb, l.Subject, l.SubjectHref = "logged in", "", ""
	case store.AuditLoginFailed:
		l.Actor, l.Verb = "A login", "as"
		if l.Subject == "" {
			l.Subject = cmp.Or(d.Email, "an unknown email")
		}
		l.Rest = " failed"
		if d.Reason != "" {
			l.Rest += " (" + d.Reason + ")"
		}
	case store.AuditGrantAdded:
		l.Verb, l.Rest = "gave", " "+GrantWords(d.Grant)
	case store.AuditGrantRemoved:
		l.Verb = "took away " + GrantWords(d.Grant) + " from"
	case store.AuditRoleChanged:
		l.Verb, l.Rest = "changed the role of", " from "+d.From+" to "+d.To
	case store.AuditUserDisabled:
		l.Verb = "disabled the account of"
	case store.AuditUserEnabled:
		l.Verb = "enabled again the account of"
	case store.AuditTokenCreated:
		l.Verb, l.Rest = "made an API token for", " named “"+d.Name+"”"
	case store.AuditTokenRevoked:
		l.Verb, l.Rest = "revoked the API token of", " named “"+d.Name+"”"
	case store.AuditRunApproved:
		l.Verb, l.Rest = "approved the refund of", givenReason(d.Reason)
	case store.AuditRunCancelRequested:
		l.Verb, l.Rest = "asked to cancel", givenReason(d.Reason)
	case store.AuditWebhookCreated, store.AuditWebhookDeleted, store.AuditWebhookRotated,
		store.AuditWebhookDisabled, store.AuditWebhookEnabled, store.AuditWebhookResent:
		l.Verb, l.Subject, l.Rest = webhookAuditWords(e.Action, d)
		l.SubjectHref = ""
	default:
		l.Verb = e.Action
	}
	return l
}

// webhookAuditWords are the verb, subject and rest of a change to a
// webhook endpoint: the endpoint is named by its URL.
func webhookAuditWords(action string, d auditDetails) (verb, subject, rest string) {
	subject = cmp.Or(d.URL, "a webhook endpoint")
	switch action {
	case store.AuditWebhookCreated:
		return "added the webhook endpoint", subject, ""
	case store.AuditWebhookDeleted:
		return "deleted the webhook endpoint", subject, ""
	case store.AuditWebhookRotated:
		return "rotated the secret of the webhook endpoint", subject, ""
	case store.AuditWebhookDisabled:
		return "disabled the webhook endpoint", subject, ""
	case store.AuditWebhookEnabled:
		if d.From != "" {
			rest = ", from the events of " + d.From
		}
		return "enabled the webhook endpoint", subject, rest
	}
	return "asked to send " + cmp.Or(d.Type, "an event") + " (event " + strconv.FormatInt(d.Seq, 10) + ") again to", subject, ""
}

// givenReason is the reason given with a decision, after its subject, ""
// when none was.
func givenReason(reason string) string {
	if reason == "" {
		return ""
	}
	return ", saying “" + reason + "”"
}

// auditSubject names what an entry is about, with a link if viewer may
// open it: a user for admins, a run for support.
func auditSubject(e store.AuditEntry, viewer *store.User) (string, string) {
	kind, id, _ := strings.Cut(e.Subject, ":")
	switch kind {
	case "user":
		name := "user #" + id
		if e.SubjectName.Valid {
			name = e.SubjectName.String + " (" + e.SubjectEmail.String + ")"
		}
		if viewer != nil && viewer.Role == store.RoleAdmin {
			return name, "/admin/users#" + "user-" + id
		}
		return name, ""
	case "run":
		runID, err := uuid.Parse(id)
		if err != nil {
			return "run " + id, ""
		}
		name := "run " + shortID(runID)
		if viewer != nil && viewer.Role == store.RoleSupport {
			return name, supportRunHref(runID)
		}
		return name, ""
	}
	return e.Subject, ""
}

// auditNext is the address of the page of older entries after entries.
func auditNext(action string, entries []store.AuditEntry) string {
	last := entries[len(entries)-1].ID
	href := "/support/audit?before=" + strconv.FormatInt(last, 10)
	if action != "" {
		href += "&action=" + url.QueryEscape(action)
	}
	return href
}

func auditRowID(id int64) string { return "audit-" + strconv.FormatInt(id, 10) }

// auditFirst is the newest page of the log, with the same filter.
func auditFirst(action string) string {
	if action == "" {
		return "/support/audit"
	}
	return "/support/audit?action=" + url.QueryEscape(action)
}

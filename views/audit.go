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

// AuditLine is an audit entry as a sentence: who, what, to whom, in the
// order of the viewer's language. Its segments tagged "actor" and
// "subject" are who acted and what it was about; the subject links to its
// page when the viewer may open it.
type AuditLine struct {
	Parts       []segment
	SubjectHref string
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

// auditActionWords names an audit action in the filter, in l.
func auditActionWords(l Lang, action string) string {
	if key := "audit.action." + action; l.has(key) {
		return l.T(key)
	}
	return action
}

// GrantWordsIn says what a grant lets its holder do, in l.
func GrantWordsIn(l Lang, grant string) string {
	if key := "admin.grant." + grant; l.has(key) {
		return l.T(key)
	}
	return l.T("admin.grant.other", map[string]any{"Grant": strings.ReplaceAll(grant, "_", " ")})
}

// auditWords turns e into a sentence for viewer, in l.
func auditWords(l Lang, e store.AuditEntry, viewer *store.User) AuditLine {
	var d auditDetails
	_ = json.Unmarshal(e.Details, &d) // the store wrote it; unreadable reads as empty
	actor := l.T("audit.nobody")
	if e.ActorName.Valid {
		actor = l.T("audit.person", map[string]any{"Name": e.ActorName.String, "Role": roleWords(l, e.ActorRole.String)})
	}
	subject, href := auditSubject(l, e, viewer)
	data := map[string]any{"Actor": actor, "Grant": GrantWordsIn(l, d.Grant), "Name": d.Name,
		"From": roleWords(l, d.From), "To": roleWords(l, d.To), "Said": givenReason(l, d.Reason)}
	key := "audit.line." + e.Action
	switch e.Action {
	case store.AuditLogin:
		subject, href = "", ""
	case store.AuditLoginFailed:
		if subject == "" {
			subject = cmp.Or(d.Email, l.T("audit.unknown_email"))
		}
		if d.Reason != "" {
			data["Why"] = l.T("audit.why", map[string]any{"Reason": loginReason(l, d.Reason)})
		}
	case store.AuditWebhookCreated, store.AuditWebhookDeleted, store.AuditWebhookRotated,
		store.AuditWebhookDisabled, store.AuditWebhookEnabled, store.AuditWebhookResent:
		subject, href = cmp.Or(d.URL, l.T("audit.a_webhook")), ""
		data["Type"], data["Seq"], data["From"] = cmp.Or(d.Type, l.T("audit.an_event")), d.Seq, ""
		if d.From != "" {
			data["From"] = l.T("audit.enabled_from", map[string]any{"From": d.From})
		}
	default:
		if !l.has(key) {
			key, data["Action"] = "audit.line.other", e.Action
			if subject == "" {
				key = "audit.line.other_alone"
			}
		}
	}
	data["Subject"] = subject
	return AuditLine{Parts: markedAs(l, key, data, map[string]string{"Actor": "actor", "Subject": "subject"}), SubjectHref: href}
}

// loginReason is why a login failed, in l (the store's code when l has no
// words for it).
func loginReason(l Lang, reason string) string {
	if key := "audit.reason." + reason; l.has(key) {
		return l.T(key)
	}
	return reason
}

// givenReason is the reason given with a decision, after its subject, in
// l, "" when none was.
func givenReason(l Lang, reason string) string {
	if reason == "" {
		return ""
	}
	return l.T("audit.said", map[string]any{"Reason": reason})
}

// auditSubject names what an entry is about, in l, with a link if viewer
// may open it: a user for admins, a run for support.
func auditSubject(l Lang, e store.AuditEntry, viewer *store.User) (string, string) {
	kind, id, _ := strings.Cut(e.Subject, ":")
	switch kind {
	case "user":
		name := l.T("audit.user_id", map[string]any{"ID": id})
		if e.SubjectName.Valid {
			name = l.T("audit.user", map[string]any{"Name": e.SubjectName.String, "Email": e.SubjectEmail.String})
		}
		if viewer != nil && viewer.Role == store.RoleAdmin {
			return name, "/admin/users#" + "user-" + id
		}
		return name, ""
	case "run":
		runID, err := uuid.Parse(id)
		if err != nil {
			return l.T("audit.run", map[string]any{"ID": id}), ""
		}
		name := l.T("audit.run", map[string]any{"ID": shortID(runID)})
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

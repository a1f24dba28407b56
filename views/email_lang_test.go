package views_test

import (
	"database/sql"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

var zhCN = views.Catalogues.Choose("zh-CN", "")

// emailWords are the words of the emails in tag, by key (email.*: one
// line a key, no plural tables).
func emailWords(t *testing.T, tag string) map[string]string {
	t.Helper()
	return catalogueOf(t, tag, "email.")
}

// cnyRun is a run of one order of CNY 299.00 in state, refunded when it
// completed, with no final answer (the page's words only).
func cnyRun(state string) *store.Snapshot {
	run := &store.Run{ID: uuid.New(), OwnerID: customerID, OrderID: 7, Amount: 29900, Currency: "CNY", Reason: "收到时已损坏", State: state}
	snap := &store.Snapshot{Run: run}
	if state == store.StateCompleted {
		snap.Operations = []store.Operation{{ID: uuid.New(), State: store.OpSucceeded, Amount: 29900, Currency: "CNY",
			ProviderRef: sql.NullString{String: "re_1", Valid: true}}}
	}
	return snap
}

// englishEmailWords are the words of the English email catalogue that a
// Chinese email must not hold: each value's text between its fields,
// where it has a word of four letters or more.
func englishEmailWords(t *testing.T) []string {
	t.Helper()
	en := emailWords(t, "en")
	if len(en) == 0 {
		t.Fatal("the English catalogue holds no email words")
	}
	field := regexp.MustCompile(`\{\{[^}]*\}\}`)
	word := regexp.MustCompile(`[A-Za-z]{4,}`)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(en)) {
		for _, part := range field.Split(en[k], -1) {
			if part = strings.TrimSpace(part); word.MatchString(part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// wantChinese fails if e holds any of the English email catalogue's words.
func wantChinese(t *testing.T, e views.Email, english []string) {
	t.Helper()
	for _, w := range english {
		if strings.Contains(e.Subject, w) || strings.Contains(e.Body, w) {
			t.Errorf("the Chinese email holds the English %q:\n%s\n\n%s", w, e.Subject, e.Body)
		}
	}
}

// TestEndedEmail_InTheRecipientsLanguage: a customer who saved zh-CN reads
// their refunded run's email in Chinese, the seed's "已退款" and "299 元"
// in it; one who saved nothing reads it in English, as before.
func TestEndedEmail_InTheRecipientsLanguage(t *testing.T) {
	english := englishEmailWords(t)
	zh := views.EndedEmail(views.NewRunView(cnyRun(store.StateCompleted), false, views.Viewer{UserID: customerID, Lang: zhCN}), "https://r.example/runs/x")
	if want := "您的订单 #7 退款 299 元：已退款"; zh.Subject != want {
		t.Errorf("Chinese subject = %q, want %q", zh.Subject, want)
	}
	for _, want := range []string{"已退款", "299 元 · 订单 #7 · “收到时已损坏”", "款项将退回您的原支付方式。", "查看详情：https://r.example/runs/x"} {
		if !strings.Contains(zh.Body, want) {
			t.Errorf("Chinese body lacks %q:\n%s", want, zh.Body)
		}
	}
	wantChinese(t, zh, english)

	en := views.EndedEmail(views.NewRunView(cnyRun(store.StateCompleted), false, views.Viewer{UserID: customerID}), "https://r.example/runs/x")
	if want := "Your refund of 299.00 CNY for order #7: Refunded"; en.Subject != want {
		t.Errorf("English subject = %q, want %q", en.Subject, want)
	}
	for _, want := range []string{"299.00 CNY · order #7 · “收到时已损坏”", "See it: https://r.example/runs/x"} {
		if !strings.Contains(en.Body, want) {
			t.Errorf("English body lacks %q:\n%s", want, en.Body)
		}
	}
	if strings.ContainsAny(en.Subject+strings.ReplaceAll(en.Body, "收到时已损坏", ""), "元您订单查看") {
		t.Errorf("the English email holds Chinese:\n%s\n\n%s", en.Subject, en.Body)
	}
}

// TestWaitingEmail_InTheRecipientsLanguage: an approver who saved zh-CN
// reads "waiting for you" in Chinese, its deadline as Chinese writes a
// time; a request decided before the email was written says so in Chinese.
func TestWaitingEmail_InTheRecipientsLanguage(t *testing.T) {
	english := englishEmailWords(t)
	viewer := views.Viewer{UserID: approverID, Staff: true, MayApprove: true, MayCancel: true, Lang: zhCN}
	snap := cnyRun(store.StateAwaitingApproval)
	snap.Approval = &store.Approval{RunID: snap.Run.ID, Deadline: sql.NullTime{Time: time.Date(2026, 12, 4, 14, 5, 0, 0, time.UTC), Valid: true}}
	e := views.WaitingEmail(views.NewRunView(snap, false, viewer), "https://r.example/runs/x")
	if want := "订单 #7 申请退款 299 元，等待您审批"; e.Subject != want {
		t.Errorf("subject = %q, want %q", e.Subject, want)
	}
	for _, want := range []string{"等待审批人审批", "审批人可在 2026年12月4日 14:05 UTC 之前作出决定。", "批准或取消：https://r.example/runs/x"} {
		if !strings.Contains(e.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, e.Body)
		}
	}
	wantChinese(t, e, english)

	decided := cnyRun(store.StateCanceled)
	e = views.WaitingEmail(views.NewRunView(decided, false, viewer), "https://r.example/runs/x")
	if !strings.Contains(e.Subject, "此前曾请求审批") || !strings.HasPrefix(e.Body, "此申请曾请求审批，现已无需审批。") {
		t.Errorf("the decided request's email:\n%s\n\n%s", e.Subject, e.Body)
	}
	wantChinese(t, e, english)
}

// TestRequestEmails_InTheRecipientsLanguage: a request of several orders
// reads in Chinese, in its owner's email and its approvers' alike, its
// counts as Chinese counts them.
func TestRequestEmails_InTheRecipientsLanguage(t *testing.T) {
	english := englishEmailWords(t)
	parent := &store.Run{ID: uuid.New(), OwnerID: customerID, Kind: store.KindRequest, Currency: "CNY", Reason: "都坏了", State: store.StatePlanning}
	kid := func(amount int64, state string) *store.Snapshot {
		return &store.Snapshot{Run: &store.Run{ID: uuid.New(), OwnerID: customerID, OrderID: 8, Amount: amount, Currency: "CNY", State: state}}
	}
	fs := &store.FamilySnapshot{Parent: &store.Snapshot{Run: parent},
		Children: []*store.Snapshot{kid(10000, store.StateAwaitingApproval), kid(19900, store.StateAwaitingApproval)}}
	approver := views.Viewer{UserID: approverID, Staff: true, MayApprove: true, Lang: zhCN}
	e := views.RequestWaitingEmail(views.NewFamilyView(fs, false, approver), "https://r.example/runs/p")
	if want := "一项退款申请（2 个订单）等待您审批"; e.Subject != want {
		t.Errorf("subject = %q, want %q", e.Subject, want)
	}
	for _, want := range []string{"等待审批：2 笔退款，共 299 元。", "“都坏了”", "批准或取消：https://r.example/runs/p"} {
		if !strings.Contains(e.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, e.Body)
		}
	}
	wantChinese(t, e, english)
	en := views.RequestWaitingEmail(views.NewFamilyView(fs, false, views.Viewer{UserID: approverID, Staff: true, MayApprove: true}), "https://r.example/runs/p")
	if want := "Waiting for a decision: two refunds, 299.00 CNY in all."; !strings.Contains(en.Body, want) {
		t.Errorf("English body lacks %q:\n%s", want, en.Body)
	}

	parent.State = store.StateCompleted
	fs.Children = []*store.Snapshot{kid(10000, store.StateCanceled), kid(19900, store.StateCanceled)}
	e = views.RequestEndedEmail(views.NewFamilyView(fs, false, views.Viewer{UserID: customerID, Lang: zhCN}), "https://r.example/runs/p")
	if want := "您的退款申请（2 个订单）：已取消"; e.Subject != want {
		t.Errorf("ended subject = %q, want %q", e.Subject, want)
	}
	if !strings.HasSuffix(e.Body, "查看详情：https://r.example/runs/p\n") {
		t.Errorf("ended body does not end with its link:\n%s", e.Body)
	}
	wantChinese(t, e, english)
}

// TestEmailCatalogues_SameFields: each email's words fill in the same
// fields in every language (a count's .Words and .Count are one field),
// so no language drops the link, the amount or the deadline.
func TestEmailCatalogues_SameFields(t *testing.T) {
	field := regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)
	fields := func(s string) []string {
		var out []string
		for _, m := range field.FindAllStringSubmatch(s, -1) {
			if f := m[1]; f == "Words" {
				out = append(out, "Count")
			} else {
				out = append(out, f)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	en, zh := emailWords(t, "en"), emailWords(t, "zh-CN")
	for _, k := range slices.Sorted(maps.Keys(en)) {
		if !strings.HasPrefix(k, "email.") {
			t.Errorf("%q: the emails' keys begin with email.", k)
		}
		if got, want := fields(zh[k]), fields(en[k]); !slices.Equal(got, want) {
			t.Errorf("%q fills in %v in Chinese, %v in English", k, got, want)
		}
	}
}

package views_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The watching pages in Chinese (issue 36): the timeline, the request's
// words, the banners and the step timer, and no English word of the
// catalogues left on a run's, a request's or the home page.

var zh = views.Catalogues.Choose("zh-CN", "")

// cny is a CNY event's payload fields beside extra.
func cny(extra map[string]any) map[string]any {
	p := map[string]any{"order_id": 42, "amount": 29900, "currency": "CNY"}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func TestEventText_InChinese(t *testing.T) {
	t.Parallel()
	deadline := time.Unix(1700000000, 0).Add(24 * time.Hour)
	for _, c := range []struct {
		ev     store.Event
		zh, en string
	}{
		{ev(1, store.EventRunCreated, cny(nil)), "已申请为订单 #42 退款 299 元", "Refund of 299.00 CNY requested for order #42"},
		{ev(1, store.EventRunCreated, cny(map[string]any{"refunds": []map[string]any{{"order_id": 1}, {"order_id": 2}}})),
			"已申请为 2 个订单退款，共 299 元", "Refunds of 299.00 CNY in all requested for 2 orders"},
		{ev(2, store.EventStepAttempt, map[string]any{"step": "submitting", "attempt": 2}), "代理再次开始向支付服务商提交退款（第 2 次尝试）",
			"The agent began sending the refund to the payment provider again (attempt 2)"},
		{ev(3, store.EventApprovalRequested, map[string]any{"deadline": deadline}), "已请审批人在 24 小时内做出决定",
			"Asked an approver to decide within 24 hours"},
		{ev(4, store.EventApprovalExpired, map[string]any{"requested_at": time.Unix(1700000000, 0), "deadline": deadline}),
			"没有审批人在 24 小时内做出决定：系统已取消这笔退款", "No approver decided within 24 hours: the system canceled the refund"},
		{ev(5, store.EventChildFinished, map[string]any{"order_id": 3, "state": "failed", "outcome": "declined", "refunded": 0, "currency": "CNY"}),
			"订单 #3 的退款已结束：已被拒绝，未退还任何款项", "The refund for order #3 ended: Declined, nothing refunded"},
		{ev(6, store.EventOperationSucceeded, cny(map[string]any{"provider_ref": "re_1"})), "支付服务商已确认退款 299 元（参考号 re_1）",
			"The payment provider confirmed the refund of 299.00 CNY (reference re_1)"},
		{ev(7, store.EventOperationReconciling, cny(nil)), "支付服务商没有答复：已开始核对结果", "No answer from the payment provider: began verifying the result"},
	} {
		if got := views.EventTextIn(c.ev, zh); got != c.zh {
			t.Errorf("%s in Chinese: %q, want %q", c.ev.Type, got, c.zh)
		}
		if got := views.EventText(c.ev); got != c.en {
			t.Errorf("%s in English: %q, want %q", c.ev.Type, got, c.en)
		}
	}
}

// latin finds a Latin letter: a Chinese line of history, with no name or
// reference in it, has none.
var latin = regexp.MustCompile(`[A-Za-z]`)

// han finds a Chinese character.
var han = regexp.MustCompile(`\p{Han}`)

func TestEventText_EveryTypeInChinese(t *testing.T) {
	t.Parallel()
	payload := cny(map[string]any{"step": "planning", "attempt": 2, "refunded": 100, "state": "completed",
		"deadline": time.Unix(1700003600, 0), "requested_at": time.Unix(1700000000, 0)})
	for _, typ := range store.EventTypes() {
		if typ == store.EventNarrationDelta {
			continue
		}
		if got := views.EventTextIn(ev(5, typ, payload), zh); latin.MatchString(got) {
			t.Errorf("%s reads %q in Chinese", typ, got)
		}
	}
}

func TestRunViewEventText_WhoActedInChinese(t *testing.T) {
	t.Parallel()
	approved := ev(8, store.EventApprovalGranted, map[string]any{"by": approverID, "by_role": store.RoleApprover, "by_name": "王芳", "reason": "金额无误"})
	canceled := ev(9, store.EventCancelRequested, map[string]any{"by": customerID, "by_role": store.RoleCustomer, "reason": "买错了"})
	staff := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: supportID, Staff: true, Lang: zh})
	if got, want := staff.EventText(approved), "已由王芳（审批人）批准：“金额无误”"; got != want {
		t.Errorf("staff read %q, want %q", got, want)
	}
	customer := views.NewRunView(testSnapshot(), true, views.Viewer{UserID: customerID, Lang: zh})
	if got, want := customer.EventText(approved), "已由审批人批准"; got != want {
		t.Errorf("the customer read %q, want %q (an approval's reason is for staff)", got, want)
	}
	if got, want := customer.EventText(canceled), "您已申请取消：“买错了”"; got != want {
		t.Errorf("the customer read %q, want %q", got, want)
	}
}

func TestFamilyWords_InChinese(t *testing.T) {
	t.Parallel()
	inCNY := func(p *store.Progress) *store.Progress {
		p.Run.Currency = "CNY"
		for i := range p.Operations {
			p.Operations[i].Currency = "CNY"
		}
		return p
	}
	parent := &store.Run{Currency: "CNY"}
	viewer := views.Viewer{UserID: customerID, Lang: zh}
	w := views.FamilyWords(parent, "", []*store.Progress{
		inCNY(child(15000, store.StateCompleted, op(store.OpSucceeded, 15000))),
		inCNY(child(20000, store.StateCompleted, op(store.OpSucceeded, 20000))),
		inCNY(child(15000, store.StateFailed, op(store.OpFailed, 15000))),
	}, viewer)
	if w.Status != "部分退款（3 笔中 2 笔）" || w.Outcome != "已退款 350 元（共申请 500 元）：2 个订单已退款，1 个订单被支付服务商拒绝。" {
		t.Errorf("ended: %q: %q", w.Status, w.Outcome)
	}
	if w.Ended != "这个申请已处理完毕：所有退款均已结束。" {
		t.Errorf("ended line: %q", w.Ended)
	}
	going := views.FamilyWords(parent, "", []*store.Progress{
		canceledBy(inCNY(child(10000, store.StateCanceled)), &store.Decider{UserID: customerID, Role: store.RoleCustomer}),
		inCNY(child(10000, store.StateReconciling, op(store.OpReconciling, 10000))),
		inCNY(child(10000, store.StateAwaitingApproval)),
	}, viewer)
	if want := "尚未退款：1 个订单被您取消；1 笔退款仍在核对，1 个订单等待审批人审批。"; going.Outcome != want {
		t.Errorf("going: %q, want %q", going.Outcome, want)
	}
}

// renderIn renders c for a viewer of l, on the page at path.
func renderIn(t *testing.T, l views.Lang, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	ctx := views.WithPath(views.WithLang(context.Background(), l), "/")
	if err := c.Render(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestBanners_InChinese(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		c      templ.Component
		zh, en string
	}{
		{views.ResetBanner(true, nil), "您离线期间，这笔退款仍在继续处理。以下是它目前的状态。", "The run continued while you were offline. This is where it stands now."},
		{views.StreamRestarting(), "正在重新连接…", "Reconnecting…"},
		{views.StreamClose(views.RunFinished, false), "这笔退款已处理完毕。", "The run has finished."},
		{views.StreamClose(views.RequestFinished, false), "这个申请已处理完毕：所有退款均已结束。", "The request has finished: every refund has ended."},
	} {
		if got := strings.TrimSpace(renderIn(t, zh, c.c).Text()); got != c.zh {
			t.Errorf("in Chinese: %q, want %q", got, c.zh)
		}
		if got := strings.TrimSpace(renderIn(t, views.English, c.c).Text()); got != c.en {
			t.Errorf("in English: %q, want %q", got, c.en)
		}
	}
}

// TestLiveWords_InChinese: the words static/live.js writes come with the
// page, in its language.
func TestLiveWords_InChinese(t *testing.T) {
	t.Parallel()
	doc := renderIn(t, zh, views.HomePage(&store.User{Name: "李雷", Role: store.RoleCustomer}, views.Home{}))
	words := map[string]string{}
	if err := json.Unmarshal([]byte(doc.Find("body").AttrOr("data-live-words", "")), &words); err != nil {
		t.Fatal(err)
	}
	if words["live"] != "实时更新中" || words["elapsed.m"] != "{m} 分 {s} 秒" || words["reconnecting"] != "正在重新连接…" {
		t.Errorf("live words in Chinese: %v", words)
	}
}

func TestElapsed_InEachLanguage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d      time.Duration
		en, zh string
	}{
		{42 * time.Second, "42 s", "42 秒"},
		{65 * time.Second, "1 min 5 s", "1 分 5 秒"},
		{3700 * time.Second, "1 h 1 min", "1 小时 1 分"},
	} {
		if got := views.Elapsed(c.d, views.English); got != c.en {
			t.Errorf("English %v: %q, want %q", c.d, got, c.en)
		}
		if got := views.Elapsed(c.d, zh); got != c.zh {
			t.Errorf("Chinese %v: %q, want %q", c.d, got, c.zh)
		}
	}
}

// englishWords are the English catalogue's words a watching page may say
// (its own keys, and the status, steps, next, cancel, who and outcome
// words), cut at their blanks ({{.Amount}}) into the pieces that hold a
// word of two letters or more.
func englishWords(t *testing.T) []string {
	t.Helper()
	blank := regexp.MustCompile(`\{\{[^}]*\}\}`)
	word := regexp.MustCompile(`[A-Za-z]{2,}`)
	var out []string
	// The watching pages' own words and the words table's.
	en := catalogueOf(t, "en", "run.", "event.", "family.", "home.", "banner.", "reason.", "elapsed.", "list.",
		"layout.", "status.", "step.", "next.", "cancel.", "approved.", "who.", "role.", "outcome.", "request.")
	for _, v := range en {
		for _, piece := range blank.Split(v, -1) {
			if piece = strings.TrimSpace(piece); word.MatchString(piece) {
				out = append(out, piece)
			}
		}
	}
	if len(out) < 100 {
		t.Fatalf("only %d English words read", len(out))
	}
	return out
}

// wantNoEnglish fails for each English piece the page says: in its text,
// its labels, or its title.
func wantNoEnglish(t *testing.T, name string, doc *goquery.Document, english []string) {
	t.Helper()
	said := []string{doc.Text()}
	doc.Find("[aria-label], [data-label]").Each(func(_ int, s *goquery.Selection) {
		said = append(said, s.AttrOr("aria-label", ""), s.AttrOr("data-label", ""))
	})
	page := strings.Join(said, "\n")
	for _, e := range english {
		if regexp.MustCompile(`(^|[^A-Za-z])` + regexp.QuoteMeta(e) + `([^A-Za-z]|$)`).MatchString(page) {
			t.Errorf("%s says %q in Chinese", name, e)
		}
	}
	if !han.MatchString(page) {
		t.Errorf("%s says nothing in Chinese: %q", name, page)
	}
}

// zhRun is a run of 299 元 in state, its history in Chinese where the
// customer or the agent wrote it.
func zhRun(state string, ops ...store.Operation) store.Progress {
	run := &store.Run{ID: uuid.New(), OwnerID: customerID, OrderID: 42, Amount: 29900, Currency: "CNY", Reason: "尺码不合适",
		State: state, ParentRunID: uuid.NullUUID{UUID: uuid.New(), Valid: true}}
	return store.Progress{Run: run, State: state, Operations: ops, CoveringSeq: 20}
}

func zhOp(state, lastError string) store.Operation {
	return store.Operation{ID: uuid.New(), State: state, Amount: 29900, Currency: "CNY", LastError: lastError,
		ProviderRef: sql.NullString{String: "re_1", Valid: state == store.OpSucceeded}}
}

// zhTimeline is one line of history of every type.
func zhTimeline() []store.Event {
	payload := cny(map[string]any{"step": "planning", "attempt": 2, "refunded": 100, "state": "completed",
		"deadline": time.Unix(1700003600, 0), "requested_at": time.Unix(1700000000, 0),
		"by": approverID, "by_role": store.RoleApprover, "by_name": "王芳", "reason": "金额无误"})
	var out []store.Event
	for i, typ := range store.EventTypes() {
		if typ != store.EventNarrationDelta {
			out = append(out, ev(int64(i+1), typ, payload))
		}
	}
	return out
}

// zhRunViews are a run's page in each state it can show, each to the
// viewer who sees most of it.
func zhRunViews() map[string]*views.RunView {
	approver := &store.Decider{UserID: approverID, Role: store.RoleApprover, Name: "王芳", Reason: "金额无误"}
	customer := views.Viewer{UserID: customerID, MayCancel: true, MayAskAgain: true, Lang: zh}
	staff := views.Viewer{UserID: approverID, MayApprove: true, MayCancel: true, Staff: true, Lang: zh}
	at := func(p store.Progress, viewer views.Viewer, full bool) *views.RunView {
		v := &views.RunView{Progress: p, Viewer: viewer, Full: full, Timeline: zhTimeline(), ReplayFloor: 3,
			NarrationTrimmed: true, NarrationHidden: 4,
			Narration: []views.Narration{{Seq: 5, Text: "我正在核查订单。"}}}
		v.RestartSeq = 2
		if !full {
			v.Timeline, v.Narration = nil, nil
		}
		return v
	}
	waiting := zhRun(store.StateAwaitingApproval)
	waiting.ApprovalAsked, waiting.Deadline, waiting.StateSince = true, time.Now().Add(time.Hour), time.Now().Add(-75*time.Second)
	tooLate := zhRun(store.StateSubmitting, zhOp(store.OpSubmitted, ""))
	tooLate.CancelRequested, tooLate.CanceledBy = true, &store.Decider{UserID: customerID, Role: store.RoleCustomer}
	done := zhRun(store.StateCompleted, zhOp(store.OpSucceeded, ""))
	done.ApprovalAsked, done.ApprovedBy = true, approver
	done.FinalMessage, done.FinalIn = "Refunded.", store.Translations{"zh-CN": "已退款 299 元。"}
	declined := zhRun(store.StateFailed, zhOp(store.OpFailed, "银行卡已注销"))
	canceled := zhRun(store.StateCanceled)
	canceled.ApprovalAsked, canceled.CancelRequested, canceled.CanceledBy = true, true, approver
	expired := zhRun(store.StateCanceled)
	expired.ApprovalAsked, expired.Expiry = true, &store.ApprovalExpired{RequestedAt: time.Unix(1700000000, 0), Deadline: time.Unix(1700086400, 0)}
	return map[string]*views.RunView{
		"created":          at(zhRun(store.StateCreated), customer, true),
		"planning":         at(zhRun(store.StatePlanning), customer, true),
		"waiting":          at(waiting, staff, true),
		"cancel too late":  at(tooLate, customer, true),
		"reconciling":      at(zhRun(store.StateReconciling, zhOp(store.OpReconciling, "")), customer, true),
		"refunded":         at(done, staff, true),
		"declined":         at(declined, customer, true),
		"canceled":         at(canceled, customer, true),
		"expired":          at(expired, staff, true),
		"not refunded":     at(zhRun(store.StateFailed), customer, true),
		"status only":      at(zhRun(store.StatePlanning), customer, false),
		"status only, end": at(declined, staff, false),
	}
}

func TestRunPage_NoEnglishInChinese(t *testing.T) {
	t.Parallel()
	english := englishWords(t)
	user := &store.User{ID: customerID, Name: "李雷", Role: store.RoleCustomer}
	for name, v := range zhRunViews() {
		doc := renderIn(t, zh, views.RunPage(user, v))
		wantNoEnglish(t, name, doc, english)
		if name == "refunded" && !strings.Contains(doc.Find("#final-answer").Text(), "已退款 299 元。") {
			t.Errorf("the final answer in Chinese: %q", doc.Find("#final-answer").Text())
		}
		// The timer counts from when the step began (75 s before the
		// view was made): its minutes and seconds, whatever the clock.
		if name == "waiting" && !regexp.MustCompile(`^1 分 \d{1,2} 秒$`).MatchString(strings.TrimSpace(doc.Find("#step-timer").Text())) {
			t.Errorf("the step timer in Chinese: %q", doc.Find("#step-timer").Text())
		}
	}
}

func TestFamilyPage_NoEnglishInChinese(t *testing.T) {
	t.Parallel()
	english := englishWords(t)
	snap := func(state string, ops ...store.Operation) *store.Snapshot {
		p := zhRun(state, ops...)
		p.Run.Kind, p.Run.ParentRunID = store.KindRefund, uuid.NullUUID{}
		return &store.Snapshot{Run: p.Run, Operations: p.Operations, CoveringSeq: 3}
	}
	parent := snap(store.StatePlanning)
	parent.Run.Kind = store.KindRequest
	for name, c := range map[string]struct {
		children []*store.Snapshot
		viewer   views.Viewer
	}{
		"going, to an approver": {[]*store.Snapshot{snap(store.StateCompleted, zhOp(store.OpSucceeded, "")),
			snap(store.StateAwaitingApproval), snap(store.StateAwaitingApproval), snap(store.StateReconciling, zhOp(store.OpReconciling, ""))},
			views.Viewer{UserID: approverID, MayApprove: true, MayCancel: true, Staff: true, Lang: zh}},
		"ended, to its customer": {[]*store.Snapshot{snap(store.StateCompleted, zhOp(store.OpSucceeded, "")),
			snap(store.StateFailed, zhOp(store.OpFailed, "银行卡已注销")), snap(store.StateFailed)},
			views.Viewer{UserID: customerID, MayCancel: true, MayAskAgain: true, Lang: zh}},
	} {
		f := views.NewFamilyView(&store.FamilySnapshot{Parent: parent, Children: c.children}, true, c.viewer)
		f.Offline[1] = true
		user := &store.User{ID: c.viewer.UserID, Name: "李雷", Role: store.RoleCustomer}
		wantNoEnglish(t, name, renderIn(t, zh, views.FamilyPage(user, f)), english)
	}
}

func TestHomePage_NoEnglishInChinese(t *testing.T) {
	t.Parallel()
	english := englishWords(t)
	one := store.RunListing{Run: store.Run{ID: uuid.New(), State: store.StateAwaitingApproval, Amount: 29900, Currency: "CNY", OrderID: 42}, Item: "运动鞋"}
	many := store.RunListing{Run: store.Run{ID: uuid.New(), Kind: store.KindRequest, State: store.StatePlanning, Amount: 59800, Currency: "CNY"},
		Children: 2, ChildrenEnded: 1}
	orders := []store.Order{{ID: 42, Description: "运动鞋", Amount: 29900, Refundable: 29900, Currency: "CNY"}}
	customer := renderIn(t, zh, views.HomePage(&store.User{Name: "李雷", Role: store.RoleCustomer},
		views.Home{Orders: orders, Runs: &store.OwnRuns{Runs: []store.RunListing{one, many}}}))
	wantNoEnglish(t, "a customer's home", customer, english)
	if got := strings.Join(strings.Fields(customer.Find("#run-row-"+one.ID.String()+" a").Text()), " "); got != "运动鞋 退款 299 元 — 等待审批人审批" {
		t.Errorf("a run's row in Chinese: %q", got)
	}
	for _, role := range []string{store.RoleSupport, store.RoleAdmin} {
		doc := renderIn(t, zh, views.HomePage(&store.User{Name: "韩梅梅", Role: role}, views.Home{}))
		if doc.Find("h1").Text() != "您好，韩梅梅" {
			t.Errorf("%s's greeting: %q", role, doc.Find("h1").Text())
		}
		wantNoEnglish(t, role+"'s home", doc, english)
	}
}

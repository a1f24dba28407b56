package views_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"github.com/google/uuid"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// The staff pages in Chinese: every word a person reads comes from the
// catalogues, none of the English is left (the staff pages' English words, or any
// run of English words at all), and the English pages read as before.

var (
	staffAt   = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	staffZh   = views.Catalogues.Choose("zh-CN", "")
	staffRun  = uuid.MustParse("01950000-0000-7000-8000-0000000000a1")
	staffKid  = uuid.MustParse("01950000-0000-7000-8000-0000000000b2")
	staffKid2 = uuid.MustParse("01950000-0000-7000-8000-0000000000c3")
)

// staffRender renders c in l, as a handler does (views.WithLang).
func staffRender(t *testing.T, l views.Lang, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(views.WithLang(context.Background(), l), &buf); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// staffReadable is what a person reads of doc: the text of <main> (or of
// the whole fragment) and the labels of its elements, without code or
// scripts.
func staffReadable(doc *goquery.Document) string {
	root := doc.Find("main")
	if root.Length() == 0 {
		root = doc.Selection
	}
	root = root.Clone()
	root.Find("code, script, style, .type, .action").Remove()
	var b strings.Builder
	b.WriteString(root.Text())
	root.Find("*").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"aria-label", "title", "staffPlaceholder", "data-label"} {
			if v, ok := s.Attr(attr); ok {
				b.WriteString("\n" + v)
			}
		}
	})
	return b.String()
}

// staffPlaceholder is a catalogue's {{.Name}}; the words between are English's.
var staffPlaceholder = regexp.MustCompile(`\{\{[^}]*\}\}`)

// staffEnglishWords are the runs of words of the staff pages' English, each at least one
// word of two letters, as a pattern of whole words.
func staffEnglishWords(t *testing.T) map[string]*regexp.Regexp {
	t.Helper()
	out := map[string]*regexp.Regexp{}
	for key, words := range catalogueOf(t, "en", "queue.", "support.", "admin.", "webhooks.", "provider.", "audit.") {
		for _, piece := range staffPlaceholder.Split(words, -1) {
			piece = strings.Trim(piece, " .,:;()←→…“”#·-")
			if !regexp.MustCompile(`[A-Za-z]{2,}`).MatchString(piece) || strings.HasPrefix(piece, "2006") {
				continue
			}
			out[key+": "+piece] = regexp.MustCompile(`(^|[^A-Za-z_])` + regexp.QuoteMeta(piece) + `($|[^A-Za-z_])`)
		}
	}
	return out
}

// staffEnglishRun finds two English words in a row: words left untranslated,
// whoever's catalogue they should have come from. Names of standards and
// protocols stay as they are written.
var (
	staffEnglishRun = regexp.MustCompile(`[A-Za-z]{2,}[ ,]+[A-Za-z]{2,}`)
	staffProperName = strings.NewReplacer("Standard Webhooks", " ", "410 Gone", " ")
	staffKey        = regexp.MustCompile(`\b(queue|support|admin|webhooks|provider|audit)\.[a-z_.]+[a-z]`)
	staffURL        = regexp.MustCompile(`https?://[A-Za-z0-9./_~%-]+`)
)

// staffNoEnglish fails for each English word of the staff catalogue, and
// each run of English words, in doc rendered in Chinese.
func staffNoEnglish(t *testing.T, page string, doc *goquery.Document, want ...string) {
	t.Helper()
	shown := staffReadable(doc)
	text := staffURL.ReplaceAllString(staffProperName.Replace(shown), " ")
	for _, machine := range append(store.EventTypes(), store.AuditActions...) {
		text = strings.ReplaceAll(text, machine, " ")
	}
	for what, re := range staffEnglishWords(t) {
		if loc := re.FindStringIndex(text); loc != nil {
			t.Errorf("%s in Chinese still says %q (%s)", page, text[loc[0]:loc[1]], what)
		}
	}
	for _, key := range staffKey.FindAllString(shown, -1) {
		t.Errorf("%s in Chinese shows the key %q: no catalogue has its words", page, key)
	}
	for _, run := range staffEnglishRun.FindAllString(text, -1) {
		t.Errorf("%s in Chinese has English words: %q", page, run)
	}
	for _, w := range want {
		if !strings.Contains(shown, w) {
			t.Errorf("%s in Chinese lacks %q:\n%s", page, w, shown)
		}
	}
}

func staffUser(role string) *store.User {
	return &store.User{ID: 1, Name: "管理员甲", Email: "jia@example.com", Role: role}
}

func staffPayload(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func staffEvent(seq int64, typ string, payload any) store.Event {
	return store.Event{RunID: staffRun, Seq: seq, Type: typ, Class: store.ClassOf(typ), Payload: staffPayload(payload),
		CreatedAt: staffAt.Add(time.Duration(seq) * time.Second)}
}

// staffQueue is a page of the queue: a refund of its own, due soon, whose
// proposal differs and whose order has another refund; and a request of
// two orders, both waiting.
func staffQueue() *store.QueuePage {
	single := store.QueueItem{Version: 1, RequestedAt: staffAt.Add(-time.Hour), CustomerName: "王芳", CustomerEmail: "wang@example.com",
		Item: "蓝牙耳机", OrderAmount: 29900, OrderCurrency: "CNY", OtherRefunds: 5000, OtherRuns: 1,
		Proposal: &store.ActionProposed{OrderID: 7, Amount: 20000, Currency: "CNY"},
		Deadline: sql.NullTime{Time: time.Now().Add(time.Minute), Valid: true}}
	single.ID, single.OrderID, single.Amount, single.Currency, single.Reason = staffRun, 7, 29900, "CNY", "耳机坏了"
	child := func(id uuid.UUID, version, order int64) store.QueueItem {
		it := store.QueueItem{Version: version, RequestedAt: staffAt, CustomerName: "李雷", CustomerEmail: "li@example.com",
			Item: "台灯", OrderAmount: 9900, OrderCurrency: "CNY", RequestAmount: 19800, RequestChildren: 3}
		it.ID, it.OrderID, it.Amount, it.Currency, it.Reason = id, order, 9900, "CNY", "不想要了"
		it.ParentRunID = uuid.NullUUID{UUID: staffRun, Valid: true}
		return it
	}
	return &store.QueuePage{Version: 9, Items: []store.QueueItem{single, child(staffKid, 2, 8), child(staffKid2, 3, 9)}, Total: 3}
}

func TestStaffLang_Queue(t *testing.T) {
	t.Parallel()
	p := staffQueue()
	doc := staffRender(t, staffZh, views.ApprovalQueue(p))
	staffNoEnglish(t, "the queue", doc, "待审批", "王芳 （wang@example.com）", "批准退款 299 元", "确认取消", "审批截止", "即将到期",
		"此订单的其他退款：1 笔申请共 50 元", "代理建议为订单 #7 退款 200 元", "3 笔退款待审批，最先到期的排在前面。",
		"其 3 笔退款中有 2 笔在本页待审批：共 198 元。", "全部批准（2 笔）", "2026年3月14日 08:26 UTC")

	decided := &store.Event{Type: store.EventApprovalGranted, Payload: staffPayload(store.ApprovalGranted{DecidedBy: store.DecidedBy{
		By: store.DeciderRef{UserID: 9}, ByRole: store.RoleApprover, ByName: "张伟", Reason: "照片已核对"}})}
	gone := []views.QueueGone{{Item: &p.Items[0], Decision: decided, Viewer: 2}}
	delta := staffRender(t, staffZh, views.QueueDelta(&store.QueuePage{Version: 10, Total: 0}, gone, views.QueueChange{}))
	staffNoEnglish(t, "the queue's stream", delta, "张伟（审批人）批准了 蓝牙耳机 的退款 299 元：“照片已核对”。", "没有待审批的退款。")

	en := staffRender(t, views.English, views.QueueDelta(&store.QueuePage{Version: 10, Total: 0}, gone, views.QueueChange{}))
	if got, want := en.Find("li").Text(), "张伟 (approver) approved the refund of 299.00 CNY for 蓝牙耳机: “照片已核对”."; got != want {
		t.Errorf("the queue's stream in English: %q, want %q", got, want)
	}
	enQueue := staffRender(t, views.English, views.ApprovalQueue(p))
	for sel, want := range map[string]string{
		"#queue-count": "3 refunds wait for a decision, the soonest due first.",
		"#" + views.QueueItemID(staffRun) + " .queue-checks li:nth-child(2)": "✗ Failed: Other refunds on this order: 50.00 CNY in 1 request; with this one 349.00 CNY of 299.00 CNY paid.",
		"#" + views.QueueItemID(staffRun) + " .due-soon-mark":                views.DueSoonMark,
		".queue-request-waiting": "2 of its 3 refunds wait for a decision on this page: 198.00 CNY in all.",
	} {
		if got := strings.TrimSpace(enQueue.Find(sel).First().Text()); got != want {
			t.Errorf("queue in English, %s: %q, want %q", sel, got, want)
		}
	}
}

// staffSupportRun is a refund approved with a reason, sent, confirmed,
// narrated, with a webhook delivery and an email of each kind, one of a
// request of two.
func staffSupportRun() *views.SupportRun {
	run := &store.Run{ID: staffRun, OwnerID: 7, OrderID: 7, Amount: 29900, Currency: "CNY", Reason: "耳机坏了",
		State: store.StateCompleted, CorrelationID: staffRun, CreatedAt: staffAt}
	op := uuid.MustParse("01950000-0000-7000-8000-0000000000d4")
	facts := store.OperationFacts{OperationID: op, Amount: 29900, Currency: "CNY"}
	snap := &store.Snapshot{Run: run, CoveringSeq: 9, ReplayFloor: 2, Events: []store.Event{
		staffEvent(1, store.EventRunCreated, map[string]any{"order_id": 7, "amount": 29900, "currency": "CNY"}),
		staffEvent(3, store.EventNarrationDelta, map[string]string{"text": "正在核查订单。"}),
		staffEvent(4, store.EventNarrationDelta, map[string]string{"text": "订单没问题。"}),
		staffEvent(5, store.EventApprovalGranted, store.ApprovalGranted{DecidedBy: store.DecidedBy{
			By: store.DeciderRef{UserID: 9}, ByRole: store.RoleApprover, ByName: "张伟", Reason: "照片已核对"}}),
		staffEvent(6, store.EventOperationSubmitted, store.OperationSubmitted{OperationFacts: facts}),
		staffEvent(7, store.EventOperationSucceeded, store.OperationSucceeded{OperationFacts: facts, ProviderRef: "re_1"}),
	}, Operations: []store.Operation{{ID: op, Amount: 29900, Currency: "CNY", State: store.OpSucceeded,
		ProviderRef: sql.NullString{String: "re_1", Valid: true}, CreatedAt: staffAt, UpdatedAt: staffAt}},
		Calls: []store.ProviderCall{
			{OperationID: op, Kind: store.CallSubmit, StartedAt: staffAt, Ended: true, HTTPStatus: sql.NullInt64{Int64: 200, Valid: true},
				DurationUS: sql.NullInt64{Int64: 150000, Valid: true}, Result: "re_1"},
			{OperationID: op, Kind: "lookup", StartedAt: staffAt},
		}}
	people := map[int64]store.User{7: {ID: 7, Name: "王芳", Email: "wang@example.com", Role: store.RoleCustomer},
		9: {ID: 9, Name: "张伟", Role: store.RoleApprover}}
	d := views.NewSupportRun(snap, people)
	d.Deliveries = []store.RunDelivery{
		{URL: "https://orders.example.com/hook", Seq: 5, Type: store.EventApprovalGranted, State: "delivered", Attempts: 1,
			DeliveredAt: sql.NullTime{Time: staffAt, Valid: true}, ResendAt: sql.NullTime{Time: staffAt, Valid: true},
			LastStatus: sql.NullInt64{Int64: 204, Valid: true}},
		{URL: "https://orders.example.com/hook", Seq: 6, Type: store.EventOperationSubmitted, State: "pending", Attempts: 2,
			NextAt: staffAt, LastError: sql.NullString{String: "ECONNREFUSED", Valid: true}},
		{URL: "https://orders.example.com/hook", Seq: 7, Type: store.EventOperationSucceeded, State: "skipped"},
	}
	d.Mails = []store.Mail{
		{Recipient: "wang@example.com", Kind: store.MailEnded, Subject: "您的退款已完成", State: "sent", Attempts: 1,
			SentAt: sql.NullTime{Time: staffAt, Valid: true}, MessageID: "<m1@refundd>"},
		{Recipient: "zhang@example.com", Kind: store.MailWaiting, Subject: "有退款待审批", State: "pending", Attempts: 1,
			LastError: sql.NullString{String: "421", Valid: true}, NextAt: staffAt, MessageID: "<m2@refundd>"},
	}
	return d
}

func TestStaffLang_Support(t *testing.T) {
	t.Parallel()
	d := staffSupportRun()
	doc := staffRender(t, staffZh, views.SupportRunPage(staffUser(store.RoleSupport), d))
	staffNoEnglish(t, "support's run page", doc, "订单 #7 的退款 299 元", "张伟（审批人）", "王芳（客户）", "支付服务商",
		"退款 299 元：", "提交", "查询", "未记录答复", "150 毫秒", "序号 2", "已于 2026年3月14日 09:26:53 UTC 投递；管理员已要求重新发送",
		"无答复：ECONNREFUSED", "已跳过", "申请已结束", "有待审批的决定", "尚未发送（上次尝试：421）", "说明，共 2 条：", "业务")
	en := staffRender(t, views.English, views.SupportRunPage(staffUser(store.RoleSupport), d))
	for sel, want := range map[string]string{
		"h1":                     "Refund of 299.00 CNY for order #7",
		"#sev-5 .actor":          "张伟 (approver)",
		"#sev-7 .actor":          "the payment provider",
		"#coverage-pruned":       "Retention removed narration up to seq 2: it was older than the replay window; those events are no longer kept. The history is whole from seq 3, and business events are kept under the audit policy.",
		".ledger-call .took":     "150ms",
		".support-delivery td":   "https://orders.example.com/hook",
		".support-mail td + td":  "the request ended",
		"#sev-3 .class":          "presentation",
		"#sev-3 .what":           "Narration, 2 pieces: 正在核查订单。订单没问题。",
		"#sev-1 .actor":          "王芳 (customer)",
		".ledger-op dd.attempts": "2",
	} {
		if got := strings.Join(strings.Fields(en.Find(sel).First().Text()), " "); got != want {
			t.Errorf("support's page in English, %s: %q, want %q", sel, got, want)
		}
	}

	runs := []store.RunListing{{Run: store.Run{ID: staffRun, Kind: store.KindRequest, State: store.StatePlanning, Amount: 19800,
		Currency: "CNY", CreatedAt: staffAt}, OwnerEmail: "li@example.com", Children: 2},
		{Run: store.Run{ID: staffKid, OrderID: 8, State: store.StateAwaitingApproval, Amount: 9900, Currency: "CNY", CreatedAt: staffAt,
			ParentRunID: uuid.NullUUID{UUID: staffRun, Valid: true}, CorrelationID: staffRun}, OwnerEmail: "li@example.com", Item: "台灯"}}
	q := views.SupportSearch{Query: "li@", Page: 2, Per: 2, Total: 5}
	list := staffRender(t, staffZh, views.SupportRunsPage(staffUser(store.RoleSupport), q, store.States, runs))
	staffNoEnglish(t, "support's search", list, "查找退款记录", "全部状态", "待审批", "第 3–4 条，共 5 条", "← 上一页", "下一页 →",
		"所属申请", "（多个订单）", "2026年3月14日 09:26 UTC", "198 元")
	enList := staffRender(t, views.English, views.SupportRunsPage(staffUser(store.RoleSupport), q, store.States, runs))
	if got := strings.Join(strings.Fields(enList.Find(".pager .muted").First().Text()), " "); got != "Runs 3–4 of 5" {
		t.Errorf("search pager in English: %q", got)
	}
	if got := enList.Find(`option[value="awaiting_approval"]`).Text(); got != "awaiting approval" {
		t.Errorf("state option in English: %q", got)
	}
}

func TestStaffLang_Admin(t *testing.T) {
	t.Parallel()
	me := staffUser(store.RoleAdmin)
	users := views.AdminUsers{Users: []store.User{*me,
		{ID: 2, Name: "王芳", Email: "wang@example.com", Role: store.RoleCustomer, Grants: []string{store.GrantRefundAccess}},
		{ID: 3, Name: "李雷", Email: "li@example.com", Role: store.RoleApprover, DisabledAt: sql.NullTime{Time: staffAt, Valid: true}}},
		Tokens: []store.Token{{ID: 8, UserID: 2, Name: "对账脚本", LastUsedAt: sql.NullTime{Time: staffAt, Valid: true}},
			{ID: 9, UserID: 2, Name: "旧脚本", RevokedAt: sql.NullTime{Time: staffAt, Valid: true}}, {ID: 10, UserID: 3, Name: "新脚本"}}}
	doc := staffRender(t, staffZh, views.AdminUsersPage(me, users))
	staffNoEnglish(t, "the users page", doc, "管理员", "（您）", "已有申请退款的权限", "没有申请退款的权限", "确认收回", "已停用",
		"上次使用：2026年3月14日 09:26 UTC", "从未使用", "已撤销", "新建令牌", "审批人", "审计日志")
	token := staffRender(t, staffZh, views.TokenCreatedPage(me, &users.Users[1], &store.Token{Name: "对账脚本"}, "rfd_secret"))
	staffNoEnglish(t, "a new token", token, "已为 wang@example.com 创建令牌 对账脚本", "它的权限与 wang@example.com 相同")
	if got := token.Find("main p strong").Length(); got != 2 {
		t.Errorf("a new token in Chinese marks %d names, want the token's and its owner's", got)
	}
	en := staffRender(t, views.English, views.TokenCreatedPage(me, &users.Users[1], &store.Token{Name: "ci"}, "rfd_secret"))
	if got := strings.Join(strings.Fields(en.Find("main .muted").Last().Text()), " "); got != "Send it as Authorization: Bearer … to /api/. It has the same access as wang@example.com." {
		t.Errorf("a new token in English: %q", got)
	}
}

func TestStaffLang_Webhooks(t *testing.T) {
	t.Parallel()
	now := staffAt.Add(time.Hour)
	ep := func(id string, disabled sql.NullTime, reason string, failing sql.NullTime) store.WebhookEndpoint {
		return store.WebhookEndpoint{ID: uuid.MustParse("01950000-0000-7000-8000-0000000000" + id), URL: "https://orders.example.com/" + id,
			Description: "订单系统", CreatedAt: staffAt, DisabledAt: disabled, DisabledReason: sql.NullString{String: reason, Valid: reason != ""},
			FailingSince: failing}
	}
	at := sql.NullTime{Time: staffAt, Valid: true}
	v := views.AdminWebhooks{Now: now, NewSecret: &views.NewWebhookSecret{URL: "https://orders.example.com/e1", Secret: "whsec_x", Rotated: true},
		Endpoints: []views.WebhookRow{
			{Endpoint: ep("e1", sql.NullTime{}, "", sql.NullTime{}), OldestPending: now.Add(-125 * time.Second), Attempts: []store.WebhookAttempt{
				{RunID: staffRun, Seq: 5, Type: store.EventApprovalGranted, Attempt: 2, DurationMS: 31, State: "pending",
					DeliveryDue: at, Error: sql.NullString{String: "timeout", Valid: true}},
				{RunID: staffRun, Seq: 4, Type: store.EventRunCreated, Attempt: 1, Status: sql.NullInt64{Int64: 204, Valid: true}, State: "delivered"}}},
			{Endpoint: ep("e2", at, store.WebhookGone, sql.NullTime{})},
			{Endpoint: ep("e3", at, "", sql.NullTime{})},
			{Endpoint: ep("e4", sql.NullTime{}, "", at)},
		}}
	doc := staffRender(t, staffZh, views.AdminWebhooksPage(staffUser(store.RoleAdmin), v))
	staffNoEnglish(t, "the webhooks page", doc, "https://orders.example.com/e1 的新密钥", "全部业务事件", "正常",
		"最早的待投递事件已等待 2 分 5 秒", "410 Gone", "已被管理员停用", "投递失败", "31 毫秒", "已投递", "无答复", "重新发送", "轮换密钥…")
	en := staffRender(t, views.English, views.AdminWebhooksPage(staffUser(store.RoleAdmin), v))
	for sel, want := range map[string]string{
		"#webhook-01950000-0000-7000-8000-0000000000e1 .webhook-lag":   "Oldest waiting event: 2m5s old",
		"#webhook-01950000-0000-7000-8000-0000000000e2 .webhook-state": "Disabled since 2026-03-14 09:26 UTC: it answered 410 Gone. Its events wait until it is enabled again.",
		"#webhook-01950000-0000-7000-8000-0000000000e4 .webhook-state": "Failing since 2026-03-14 09:26 UTC: retried on schedule.",
	} {
		if got := en.Find(sel).Text(); got != want {
			t.Errorf("webhooks in English, %s: %q, want %q", sel, got, want)
		}
	}
	if got, want := views.WebhookEnabledWordsIn(staffZh, "https://x.example", staffAt), "已启用 https://x.example：投递从 2026年3月14日 09:26 UTC 的事件起继续；更早的待投递事件会被跳过。"; got != want {
		t.Errorf("enabled from, in Chinese: %q, want %q", got, want)
	}
	if got, want := views.WebhookEnabledWordsIn(views.English, "https://x.example", staffAt), "Enabled https://x.example: deliveries go on from the events of 2026-03-14 09:26 UTC; earlier ones still waiting are skipped."; got != want {
		t.Errorf("enabled from, in English: %q, want %q", got, want)
	}
}

func TestStaffLang_Provider(t *testing.T) {
	t.Parallel()
	p := views.ProviderRefunds{Read: 4, Unexplained: []store.ProviderRefund{{Key: "k1", Ref: "re_9", OrderRef: "7", Amount: 29900,
		Currency: "CNY", Status: "succeeded", CreatedAt: staffAt}, {Key: "k2", Ref: "re_8", OrderRef: "8", Amount: 500, Currency: "EUR", Status: "failed", CreatedAt: staffAt}}}
	doc := staffRender(t, staffZh, views.SupportProviderPage(staffUser(store.RoleSupport), p))
	staffNoEnglish(t, "the provider's refunds", doc, "支付服务商处的 4 笔退款中，有 2 笔对应不到我们的任何记录。", "已退款", "已拒绝", "299 元")
	if doc.Find("main code").FilterFunction(func(_ int, s *goquery.Selection) bool { return s.Text() == "refundd verify" }).Length() != 1 {
		t.Error("the provider's refunds in Chinese lost the command to run")
	}
	for n, want := range map[int]string{0: "支付服务商处没有任何退款。", 3: "支付服务商处共有 3 笔退款，全部能对应到我们的记录。"} {
		if got := staffRender(t, staffZh, views.SupportProviderPage(staffUser(store.RoleSupport), views.ProviderRefunds{Read: n})).Find("#provider-explained").Text(); got != want {
			t.Errorf("%d explained in Chinese: %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int]string{1: "The one refund the payment provider holds is one of our runs'.",
		3: "Every one of the 3 refunds the payment provider holds is one of our runs'."} {
		if got := staffRender(t, views.English, views.SupportProviderPage(staffUser(store.RoleSupport), views.ProviderRefunds{Read: n})).Find("#provider-explained").Text(); got != want {
			t.Errorf("%d explained in English: %q, want %q", n, got, want)
		}
	}
}

func TestStaffLang_Audit(t *testing.T) {
	t.Parallel()
	actor := func(e store.AuditEntry) store.AuditEntry {
		e.At, e.ActorIP = staffAt, "192.0.2.1"
		e.ActorName, e.ActorRole = sql.NullString{String: "张伟", Valid: true}, sql.NullString{String: store.RoleApprover, Valid: true}
		e.SubjectName, e.SubjectEmail = sql.NullString{String: "王芳", Valid: true}, sql.NullString{String: "wang@example.com", Valid: true}
		return e
	}
	var entries []store.AuditEntry
	details := map[string]map[string]any{
		store.AuditLoginFailed:        {"reason": "wrong_password"},
		store.AuditGrantAdded:         {"grant": store.GrantRefundAccess},
		store.AuditGrantRemoved:       {"grant": store.GrantRefundAccess},
		store.AuditRoleChanged:        {"from": store.RoleCustomer, "to": store.RoleApprover},
		store.AuditTokenCreated:       {"name": "对账脚本"},
		store.AuditTokenRevoked:       {"name": "对账脚本"},
		store.AuditRunApproved:        {"reason": "照片已核对"},
		store.AuditRunCancelRequested: {"reason": "客户撤回"},
		store.AuditWebhookEnabled:     {"url": "https://orders.example.com/e1", "from": "2026-03-14T09:00:00Z"},
		store.AuditWebhookResent:      {"url": "https://orders.example.com/e1", "type": store.EventRunCreated, "seq": 4},
	}
	for i, a := range store.AuditActions {
		subject := store.UserSubject(2)
		if strings.HasPrefix(a, "run.") {
			subject = "run:" + staffRun.String()
		}
		entries = append(entries, actor(store.AuditEntry{ID: int64(100 - i), Action: a, Subject: subject, Details: staffPayload(details[a])}))
	}
	entries = append(entries, store.AuditEntry{ID: 1, At: staffAt, Action: store.AuditLoginFailed, Details: staffPayload(map[string]string{"reason": "unknown_email"})})
	v := views.AuditView{Entries: entries, More: true, Before: 200}
	doc := staffRender(t, staffZh, views.AuditPage(staffUser(store.RoleSupport), v))
	staffNoEnglish(t, "the audit log", doc, "张伟（审批人）将 王芳（wang@example.com） 的角色从客户改为审批人。",
		"以 王芳（wang@example.com） 登录失败（密码错误）。", "以 未知邮箱 登录失败（邮箱未注册）。", "批准了 退款记录 …000000a1 的退款，理由是“照片已核对”。",
		"要求向 https://orders.example.com/e1 重新发送", "来自", "更早的记录 →", "登录失败", "轮换 Webhook 密钥")
	if got := doc.Find("#audit-100 .actor").Text(); got != "张伟（审批人）" {
		t.Errorf("the audit log's actor in Chinese: %q", got)
	}
	if got := doc.Find(`#audit-91 a.subject`).Length(); got != 1 {
		t.Errorf("the audit log in Chinese links %d approved runs for support, want 1", got)
	}
	en := staffRender(t, views.English, views.AuditPage(staffUser(store.RoleSupport), v))
	for id, want := range map[string]string{
		"#audit-100": "张伟 (approver) logged in.",
		"#audit-96":  "张伟 (approver) changed the role of 王芳 (wang@example.com) from customer to approver.",
		"#audit-91":  "张伟 (approver) approved the refund of run …000000a1, saying “照片已核对”.",
		"#audit-1":   "A login as an unknown email failed (unknown_email).",
	} {
		if got := strings.Join(strings.Fields(en.Find(id+" .sentence").Text()), " "); got != want {
			t.Errorf("audit %s in English: %q, want %q", id, got, want)
		}
	}
	if !slices.Contains(store.AuditActions, store.AuditRunApproved) || en.Find(`#audit-filter option[value="webhook.rotated"]`).Text() != "Webhook secrets rotated" {
		t.Errorf("audit filter in English: %q", en.Find(`#audit-filter option[value="webhook.rotated"]`).Text())
	}
}

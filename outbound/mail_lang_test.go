package outbound_test

import (
	"context"
	"io"
	"mime"
	"net/http/httptest"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/outbound"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/store/storetest"
	"github.com/refundd/refundd/views"
)

// TestMailPlan_EndedEmailInTheOwnersLanguage: a customer who saved zh-CN
// is told their refund of CNY 299.00 ended in Chinese, subject and body,
// worded as their page words it in Chinese; the Message-ID is the one an
// English email would have.
func TestMailPlan_EndedEmailInTheOwnersLanguage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t, 1<<40)
	if err := e.s.SetLanguage(ctx, e.customer.ID, "zh-CN"); err != nil {
		t.Fatal(err)
	}
	order, err := e.s.CreateOrder(ctx, e.customer.ID, "台灯", 29900, "CNY")
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.s.StartRun(ctx, store.StartRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: order.ID, Amount: 29900, Reason: "收到时已损坏"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	e.fanOut()

	ended := e.mails()[store.MailEnded]
	if len(ended) != 1 {
		t.Fatalf("ledger holds %d ended emails, want 1", len(ended))
	}
	m := ended[0]
	for _, want := range []string{"已退款", "299 元"} {
		if !strings.Contains(m.Subject, want) || !strings.Contains(m.Body, want) {
			t.Errorf("the email lacks %q:\n%s\n\n%s", want, m.Subject, m.Body)
		}
	}
	for _, english := range []string{"Your refund", "See it", "order #", "Refunded"} {
		if strings.Contains(m.Subject+m.Body, english) {
			t.Errorf("the Chinese email holds %q:\n%s\n\n%s", english, m.Subject, m.Body)
		}
	}
	snap, err := e.s.SnapshotPage(ctx, run.ID, views.NarrationShown)
	if err != nil {
		t.Fatal(err)
	}
	v := views.NewRunView(snap, true, views.Viewer{UserID: e.customer.ID, Lang: views.Catalogues.Choose("zh-CN", "")})
	wantMail(t, m, store.MailEnded, run.ID, e.customer, views.EndedEmail(v, publicURL+"/runs/"+run.ID.String()))
	e.verify()
}

// TestMailPlan_WaitingEmailInEachApproversLanguage: of two approvers of
// one request, the one who saved zh-CN is asked in Chinese, the one who
// saved nothing in English, each their own email and Message-ID.
func TestMailPlan_WaitingEmailInEachApproversLanguage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t, 0)
	english, chinese := e.approvers[0], e.approvers[1]
	if err := e.s.SetLanguage(ctx, chinese.ID, "zh-CN"); err != nil {
		t.Fatal(err)
	}
	run := e.start(500)
	e.waitState(run.ID, store.StateAwaitingApproval)
	e.fanOut()

	byTo := map[string]store.Mail{}
	for _, m := range e.mails()[store.MailWaiting] {
		byTo[m.Recipient] = m
	}
	if len(byTo) != 2 {
		t.Fatalf("waiting emails to %d approvers, want 2: %+v", len(byTo), byTo)
	}
	order := "#" + strconv.FormatInt(e.order.ID, 10)
	if got, want := byTo[english.Email].Subject, "A refund of €5.00 for order "+order+" waits for your decision"; got != want {
		t.Errorf("English subject = %q, want %q", got, want)
	}
	if got, want := byTo[chinese.Email].Subject, "订单 "+order+" 申请退款 €5.00，等待您审批"; got != want {
		t.Errorf("Chinese subject = %q, want %q", got, want)
	}
	for _, want := range []string{"等待审批人审批", "批准或取消：" + publicURL + "/runs/" + run.ID.String()} {
		if !strings.Contains(byTo[chinese.Email].Body, want) {
			t.Errorf("Chinese body lacks %q:\n%s", want, byTo[chinese.Email].Body)
		}
	}
	for _, a := range e.approvers {
		if got, want := byTo[a.Email].MessageID, outbound.MessageID(store.MailWaiting, run.ID, a.ID, publicURL); got != want {
			t.Errorf("Message-ID to %s = %q, want %q", a.Email, got, want)
		}
	}
	e.verify()
}

// TestMailSink_ChineseSubjectEncoded: a Chinese email goes out with its
// Subject RFC 2047-encoded (ASCII on the wire, decoding back to the
// Chinese), its body UTF-8 as the Content-Type says, its Message-ID the
// ledger's; the local mail server's page shows it in Chinese.
func TestMailSink_ChineseSubjectEncoded(t *testing.T) {
	t.Parallel()
	s := storetest.MustOpen(t)
	who := storetest.MustSeedParties(t, s, 1000)
	root := uuid.New()
	link := publicURL + "/runs/" + root.String()
	m := store.NewMail{MessageID: outbound.MessageID(store.MailEnded, root, who.Customer.ID, publicURL), RunID: root,
		Kind: store.MailEnded, UserID: who.Customer.ID, Recipient: who.Customer.Email,
		Subject: "您的订单 #7 退款 299 元：已退款",
		Body:    "已退款 299 元。\n\n支付服务商已确认这笔退款（参考号 re_1）。款项将退回您的原支付方式。\n\n查看详情：" + link + "\n"}
	if err := s.RecordMails(context.Background(), []store.NewMail{m}); err != nil {
		t.Fatal(err)
	}
	e := &sinkEnv{t: t, s: s, mail: m}
	mb := startMailbox(t, "127.0.0.1:0", t.TempDir())
	e.runSink(e.mailer(mb.Addr()))
	e.waitState(store.MailSentOK)
	wantReceived(t, received(t, mb, 1)[0], m)

	raw := rawMail(t, mb.Dir())
	subject := raw.Header.Get("Subject")
	for _, c := range subject {
		if c > 0x7e {
			t.Fatalf("Subject on the wire is not ASCII: %q", subject)
		}
	}
	if !strings.Contains(subject, "=?UTF-8?") {
		t.Errorf("Subject on the wire is not RFC 2047-encoded: %q", subject)
	}
	if got, err := new(mime.WordDecoder).DecodeHeader(subject); err != nil || got != m.Subject {
		t.Errorf("Subject decodes to %q (%v), want %q", got, err, m.Subject)
	}
	if mt, params, err := mime.ParseMediaType(raw.Header.Get("Content-Type")); err != nil || mt != "text/plain" || !strings.EqualFold(params["charset"], "utf-8") {
		t.Errorf("Content-Type = %q, want text/plain; charset=UTF-8", raw.Header.Get("Content-Type"))
	}
	if got := raw.Header.Get("Message-Id"); got != m.MessageID {
		t.Errorf("Message-ID = %q, want %q", got, m.MessageID)
	}

	rec := httptest.NewRecorder()
	mb.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/", nil))
	page, _ := io.ReadAll(rec.Result().Body)
	for _, want := range []string{m.Subject, "已退款 299 元。", "查看详情："} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the mailbox page lacks %q:\n%s", want, page)
		}
	}
}

// rawMail is the one mail the mailbox in dir kept, as it came.
func rawMail(t *testing.T, dir string) *netmail.Message {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	if err != nil || len(names) != 1 {
		t.Fatalf("mailbox files: %v, %v; want one", names, err)
	}
	f, err := os.Open(names[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	msg, err := netmail.ReadMessage(f)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestMailPlan_EndedEmailInTheLanguageAskedIn: a customer who never saved
// a language gets the email of a refund in the language they asked for it
// in (the run's), not English.
func TestMailPlan_EndedEmailInTheLanguageAskedIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t, 1<<40)
	order, err := e.s.CreateOrder(ctx, e.customer.ID, "台灯", 29900, "CNY")
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.s.StartRun(ctx, store.StartRequest{OwnerID: e.customer.ID, ClientRequestID: uuid.NewString(),
		OrderID: order.ID, Amount: 29900, Reason: "收到时已损坏", Language: "zh-CN"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(run.ID, store.StateCompleted)
	e.fanOut()
	ended := e.mails()[store.MailEnded]
	if len(ended) != 1 || !strings.Contains(ended[0].Subject, "已退款") || strings.Contains(ended[0].Subject, "Your refund") {
		t.Fatalf("ended emails %+v, want one in Chinese", ended)
	}
}

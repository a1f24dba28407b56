package handlers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/handlers/stream"
	"github.com/refundd/refundd/internal/browsertest"
	"github.com/refundd/refundd/internal/devdb"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestBrowser_ChineseRunToRefunded: a customer who reads Chinese asks for
// a refund of 299 元 with the form, watches the agent (which speaks
// Chinese to them) wait for an approver, loses the network while the
// refund is approved and sent, and comes back to "已退款 299 元": every
// page, replayed fragment and banner in Chinese, with no English word of
// the words table, and the provider's ledger holding the one refund.
func TestBrowser_ChineseRunToRefunded(t *testing.T) {
	t.Parallel()
	b := &browserApp{}
	a := newApp(t, handlers.Config{Stream: stream.Config{Retry: 200 * time.Millisecond}},
		withExecutor(agent.Builtin{Words: views.Answers{}}, payments.Faults{}), wrapHandler(b.outage))
	b.streamApp = &streamApp{app: a, customer: a.user(t, "customer@example.com")}
	b.approver = a.user(t, "approver@example.com")
	ctx := context.Background()
	if err := a.store.SetLanguage(ctx, b.customer.ID, "zh-CN"); err != nil {
		t.Fatal(err)
	}
	order, err := a.store.CreateOrder(ctx, b.customer.ID, "蓝牙耳机", 29900, "CNY")
	if err != nil {
		t.Fatal(err)
	}
	b.ctx = browsertest.New(t)
	if err := browsertest.Login(b.ctx, a.srv.URL, "customer@example.com", devdb.DemoPassword); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b.ctx, chromedp.Navigate(a.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#start-form"))); err != nil {
		t.Fatal(err)
	}
	if lang, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); lang != "zh-CN" {
		t.Fatalf("<html lang=%q>, want zh-CN for a customer who chose it", lang)
	}
	wantNoEnglish(t, b.ctx, "the home page and its form")
	err = chromedp.Do(b.ctx,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#start-form input[name="order_id"][value="%d"]`, order.ID))),
		chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`#start-form input[name="amount_%d"]`, order.ID)), "299"),
		chromedp.SendKeys(chromedp.CSS(`#start-form textarea[name="reason"]`), "耳机左边没有声音"),
		chromedp.Submit(chromedp.CSS(`#start-form`)),
		chromedp.WaitVisible(chromedp.CSS("#run-status")),
	)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := a.store.RunsByOwner(ctx, b.customer.ID, 10)
	if err != nil || len(runs) != 1 || runs[0].Language != "zh-CN" {
		t.Fatalf("runs = %+v, %v; want the one the form started, in zh-CN", runs, err)
	}
	run := runs[0]
	b.waitPage(t, "the approval request", `document.querySelector('#run-status').dataset.state === 'awaiting_approval'`)
	wantRunSays(t, b, "等待审批人审批", "我正在查看订单")
	wantNoEnglish(t, b.ctx, "the run waiting for an approver")

	b.offline.Store(true)
	b.conns.closeAll()
	b.waitPage(t, "reconnecting", `document.querySelector('#stream-indicator').dataset.state === 'reconnecting'`)
	wantNoEnglish(t, b.ctx, "the page reconnecting")
	b.approve(t, run.ID)
	b.waitState(t, run.ID, store.StateCompleted)
	b.offline.Store(false)

	d := b.stored(t, run.ID)
	b.waitPage(t, "the finished run", fmt.Sprintf(
		`+document.querySelector('#run').dataset.applied === %d && document.querySelector('#stream-indicator').dataset.state === 'closed'`, d.lastSeq))
	p := b.page(t)
	if p.State != store.StateCompleted || p.Step != "已退款" || !strings.Contains(p.OutcomeText, "已退款 299 元") {
		t.Errorf("the refunded run reads state %q, step %q, outcome %q; want 已退款 and 已退款 299 元", p.State, p.Step, p.OutcomeText)
	}
	if p.Narration == nil || *p.Narration != d.narration || !strings.Contains(d.narration, "请支付服务商退款 299 元") {
		t.Errorf("narration on the page %q, in PostgreSQL %q; want the same, the agent's Chinese", deref(p.Narration), d.narration)
	}
	wantNoEnglish(t, b.ctx, "the refunded run, caught up after a network cut")
	if len(d.ops) != 1 || d.ops[0].State != store.OpSucceeded || d.ops[0].Amount != 29900 || d.ops[0].Currency != "CNY" {
		t.Errorf("ledger = %+v, want one refund of 299 元", d.ops)
	}
	if n := a.count(t, `SELECT count(*) FROM provider_refunds WHERE key IN (SELECT id::text FROM operations WHERE run_id = $1)`, run.ID); n != 1 {
		t.Errorf("the payment provider holds %d refunds, want 1", n)
	}
	b.reload(t)
	wantRunSays(t, b, "已退款", "已退款 299 元")
	wantNoEnglish(t, b.ctx, "the refunded run, reloaded")
}

// wantRunSays fails unless the run's status reads status and the page
// holds words.
func wantRunSays(t *testing.T, b *browserApp, status, words string) {
	t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#run-state').textContent.trim()`))
	if err != nil {
		t.Fatal(err)
	}
	if got != status {
		t.Errorf("status reads %q, want %q", got, status)
	}
	if text := b.runText(t); !strings.Contains(text, words) {
		t.Errorf("the run page does not say %q:\n%s", words, text)
	}
}

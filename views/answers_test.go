package views_test

import (
	"testing"
	"time"

	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestAnswers_RequestSumsAndEachOrder: a request's final answer says what
// the provider refunded of what was asked and each order's end, and quotes
// no child's own answer (each child's page and card show that).
func TestAnswers_RequestSumsAndEachOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kids []store.ChildEnding
		want string
	}{
		{"partly refunded", []store.ChildEnding{
			{OrderID: 1, State: store.StateCompleted, Amount: 1000, Refunded: 1000},
			{OrderID: 2, State: store.StateCompleted, Amount: 750, Refunded: 750},
			{OrderID: 3, State: store.StateFailed, Amount: 500, Declined: true},
		}, "Refunded €17.50 of €22.50: order #1 refunded €10.00, order #2 refunded €7.50, order #3 declined by the payment provider."},
		{"nothing refunded", []store.ChildEnding{
			{OrderID: 4, State: store.StateCanceled, Amount: 100},
			{OrderID: 5, State: store.StateFailed, Amount: 200},
			{OrderID: 6, State: store.StateCanceled, Amount: 300, Expired: true},
		}, "Nothing was refunded of €6.00 asked; no money moved: order #4 canceled, order #5 not refunded, order #6 canceled (no approver decided in time)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (views.Answers{}).Request(tc.kids, "EUR"); got.Body != tc.want {
				t.Errorf("Request = %q, want %q", got.Body, tc.want)
			}
		})
	}
}

// TestAnswers_EveryLanguage: each final answer is written in every
// language the catalogues speak when the run ends, the seed's words in
// Chinese, English the same as the API's final_message.
func TestAnswers_EveryLanguage(t *testing.T) {
	t.Parallel()
	a := views.Answers{}
	for _, c := range []struct {
		name   string
		got    store.Answer
		en, zh string
	}{
		{"refunded", a.Refunded(29900, "CNY", "re_1", false),
			"Refunded 299.00 CNY to the original payment method. The payment provider's reference is re_1.",
			"已退款 299 元，款项将退回原支付方式。支付服务商的参考号为 re_1。"},
		{"too late", a.Refunded(29900, "CNY", "re_1", true),
			"The cancel arrived too late: the refund had already reached the payment provider. Refunded 299.00 CNY to the original payment method. The payment provider's reference is re_1.",
			"取消为时已晚：退款已到达支付服务商。已退款 299 元，款项将退回原支付方式。支付服务商的参考号为 re_1。"},
		{"expired", a.Expired(48 * time.Hour),
			"No approver decided within 48 hours, so the system canceled this refund request. Nothing was refunded and no money moved.",
			"48 小时内没有审批人作出决定，系统已取消这笔退款申请。未进行退款，也没有任何资金变动。"},
		{"expired, one and a half", a.Expired(90 * time.Minute),
			"No approver decided within 1 hour 30 minutes, so the system canceled this refund request. Nothing was refunded and no money moved.",
			"1 小时 30 分钟内没有审批人作出决定，系统已取消这笔退款申请。未进行退款，也没有任何资金变动。"},
		{"declined, the provider's reason as given", a.Declined(500, "EUR", "card expired"),
			"The payment provider did not refund €5.00 (card expired). No money moved.",
			"支付服务商未退款 €5.00（card expired）。没有任何资金变动。"},
	} {
		if c.got.Body != c.en {
			t.Errorf("%s in English: %q, want %q", c.name, c.got.Body, c.en)
		}
		if got := c.got.Text("zh-CN"); got != c.zh {
			t.Errorf("%s in Chinese: %q, want %q", c.name, got, c.zh)
		}
		if got := c.got.Text("fr"); got != c.en {
			t.Errorf("%s in a language not spoken: %q, want English", c.name, got)
		}
	}
	zh := views.Catalogues.Choose("zh-CN", "")
	for d, want := range map[time.Duration][2]string{
		48 * time.Hour:                   {"48 hours", "48 小时"},
		time.Hour + 30*time.Minute:       {"1 hour 30 minutes", "1 小时 30 分钟"},
		time.Minute + time.Second:        {"1 minute 1 second", "1 分钟 1 秒"},
		4 * time.Second:                  {"4 seconds", "4 秒"},
		4*time.Second + time.Millisecond: {"4 seconds", "4 秒"},
		0:                                {"0 seconds", "0 秒"},
	} {
		if got := views.English.Window(d); got != want[0] {
			t.Errorf("Window(%v) in English = %q, want %q", d, got, want[0])
		}
		if got := zh.Window(d); got != want[1] {
			t.Errorf("Window(%v) in Chinese = %q, want %q", d, got, want[1])
		}
	}
}

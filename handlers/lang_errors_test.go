package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
)

// TestLanguage_APIRefusalsInChinese: an API refusal's message is in the
// language of the request's Accept-Language (else the user's saved one),
// its code the same English; the store's refusals too. Without either,
// the words are English as they always were.
func TestLanguage_APIRefusalsInChinese(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	jacket := a.order(t, "customer@example.com", "Rain jacket")
	zh := map[string]string{"Content-Type": "application/json", "Accept-Language": "zh-CN,zh;q=0.9"}
	start := func(hdr map[string]string, key, body string) response {
		t.Helper()
		h := map[string]string{"Idempotency-Key": key}
		for k, v := range hdr {
			h[k] = v
		}
		if key == "" {
			delete(h, "Idempotency-Key")
		}
		return a.send(t, c, http.MethodPost, "/api/runs", h, body)
	}
	wantStatus(t, start(zh, "k1", startBody(jacket.ID, 1000, "Leaks")), http.StatusCreated)

	for _, tc := range []struct {
		name, key, body   string
		status            int
		code, zh, english string
	}{
		{"the store's idempotency conflict", "k1", startBody(jacket.ID, 2000, "Leaks"), http.StatusUnprocessableEntity,
			store.CodeIdempotencyConflict, "该申请 ID 已用于另一个退款申请（订单", "this request ID was already used for a different refund request (order"},
		{"the store's invalid amount", "k2", startBody(jacket.ID, 0, "Leaks"), http.StatusUnprocessableEntity,
			store.CodeInvalid, "金额必须大于零。", "the amount must be more than zero"},
		{"no Idempotency-Key", "", startBody(jacket.ID, 1000, "Leaks"), http.StatusBadRequest,
			"missing_idempotency_key", "请发送 Idempotency-Key 请求头", "Send an Idempotency-Key header"},
		{"a misspelt field", "k3", `{"Amount":1}`, http.StatusBadRequest,
			"invalid_json", `请求体包含未知字段 "Amount"：字段名区分大小写，您是否想写 "amount"？`, `did you mean "amount"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantAPIError(t, start(zh, tc.key, tc.body), tc.status, tc.code)
			if !strings.Contains(e.Error.Message, tc.zh) {
				t.Errorf("zh-CN message = %q, want it to say %q", e.Error.Message, tc.zh)
			}
			e = wantAPIError(t, start(map[string]string{"Content-Type": "application/json"}, tc.key, tc.body), tc.status, tc.code)
			if !strings.HasPrefix(e.Error.Message, tc.english) && !strings.Contains(e.Error.Message, tc.english) {
				t.Errorf("English message = %q, want it to say %q", e.Error.Message, tc.english)
			}
		})
	}

	// A user who saved Chinese reads it without sending Accept-Language;
	// a request that asks for English gets English.
	wantRedirect(t, a.post(t, c, "/language", url.Values{"lang": {"zh-CN"}, "back": {"/"}}), "/")
	e := wantAPIError(t, start(map[string]string{"Content-Type": "application/json"}, "k4", startBody(jacket.ID, 0, "Leaks")),
		http.StatusUnprocessableEntity, store.CodeInvalid)
	if e.Error.Message != "金额必须大于零。" {
		t.Errorf("saved zh-CN: message = %q, want 金额必须大于零。", e.Error.Message)
	}
	e = wantAPIError(t, start(map[string]string{"Content-Type": "application/json", "Accept-Language": "en"}, "k4", startBody(jacket.ID, 0, "Leaks")),
		http.StatusUnprocessableEntity, store.CodeInvalid)
	if e.Error.Message != "the amount must be more than zero" {
		t.Errorf("Accept-Language en: message = %q, want the English", e.Error.Message)
	}
}

// TestError_PageInChinese: an error page speaks the viewer's language,
// its title and its message; English stays as it was.
func TestError_PageInChinese(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	page := func(accept string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, a.srv.URL+"/runs/"+uuid.NewString(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Language", accept)
		r := do(t, c, req)
		wantStatus(t, r, http.StatusNotFound)
		return r
	}
	for _, tc := range []struct{ accept, status, title, message, back string }{
		{"zh-CN", "错误 404", "未找到", "此处没有内容。它可能已被移动，或者您没有访问权限。", "返回首页"},
		{"en", "Error 404", "Not found", "There is nothing here. It may have been moved, or you may not have access to it.", "Back to the start page"},
	} {
		d := page(tc.accept).doc(t)
		if got := d.Find(".error-page .status").Text(); got != tc.status {
			t.Errorf("%s: status line = %q, want %q", tc.accept, got, tc.status)
		}
		if got := d.Find(".error-page h1").Text(); got != tc.title {
			t.Errorf("%s: title = %q, want %q", tc.accept, got, tc.title)
		}
		if got := d.Find(".error-page h1 + p").Text(); got != tc.message {
			t.Errorf("%s: message = %q, want %q", tc.accept, got, tc.message)
		}
		if got := d.Find(`.error-page a[href="/"]`).Text(); got != tc.back {
			t.Errorf("%s: back link = %q, want %q", tc.accept, got, tc.back)
		}
	}
}

// TestStart_FormInChinese: a customer who chose Chinese gets the start
// form in Chinese, and its refusals: the form's own and the store's.
func TestStart_FormInChinese(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	wantRedirect(t, a.post(t, c, "/language", url.Values{"lang": {"zh-CN"}, "back": {"/"}}), "/")
	home := a.get(t, c, "/")
	wantStatus(t, home, http.StatusOK)
	d := home.doc(t)
	for sel, want := range map[string]string{
		"#refund-request h2":              "申请退款",
		"#start-form legend":              "要退款的订单",
		`#start-form button[type=submit]`: "申请退款",
	} {
		if got := strings.TrimSpace(d.Find(sel).First().Text()); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	if got := d.Find(`#start-form label:has(textarea)`).Text(); !strings.Contains(got, "退款原因") {
		t.Errorf("reason label = %q, want 退款原因", got)
	}
	if got := d.Find("#start-form").Text(); strings.Contains(got, "refundable") || strings.Contains(got, "Amount for order") {
		t.Errorf("the form still speaks English: %q", got)
	}

	shoes := a.order(t, "customer@example.com", "Trail running shoes")
	for _, tc := range []struct{ amount, says string }{
		{"twelve", "请填写数字金额，例如 12.50 或 12,50。"},
		{"12.505", "金额最多只能有 2 位小数。"},
		{"1,300.00", "金额超过了该订单的剩余可退金额（€129.99）。"}, // the store's
	} {
		r := a.post(t, c, "/runs", a.startForm(t, c, shoes.ID, tc.amount, "鞋底开胶了"))
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.doc(t).Find("#start-error").Text(); got != tc.says {
			t.Errorf("amount %q: #start-error = %q, want %q", tc.amount, got, tc.says)
		}
	}
}

// TestLogin_RefusedInChinese: the login page and its refusal in the
// browser's language.
func TestLogin_RefusedInChinese(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	req, err := http.NewRequest(http.MethodPost, a.srv.URL+"/login",
		strings.NewReader(url.Values{"email": {"customer@example.com"}, "password": {"wrong"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept-Language", "zh-CN")
	r := do(t, c, req)
	wantStatus(t, r, http.StatusUnauthorized)
	d := r.doc(t)
	if got := d.Find("#login-error").Text(); got != "邮箱或密码错误。" {
		t.Errorf("#login-error = %q, want 邮箱或密码错误。", got)
	}
	if got := d.Find(".login h1").Text(); got != "登录" {
		t.Errorf("title = %q, want 登录", got)
	}
}

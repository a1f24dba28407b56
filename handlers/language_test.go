package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// TestLanguage_ChosenInOrder: a page speaks the language the viewer saved
// with the picker, else their browser's Accept-Language, else English;
// <html lang> says which, and the picker shows it chosen.
func TestLanguage_ChosenInOrder(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	page := func(path, accept string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept-Language", accept)
		}
		return do(t, c, req)
	}
	want := func(r response, lang, skip string) {
		t.Helper()
		wantStatus(t, r, http.StatusOK)
		d := r.doc(t)
		if got := d.Find("html").AttrOr("lang", ""); got != lang {
			t.Errorf("<html lang> = %q, want %q", got, lang)
		}
		if got := d.Find(".skip-link").Text(); got != skip {
			t.Errorf("skip link = %q, want %q", got, skip)
		}
		if got := d.Find(`.lang-picker option[selected]`).AttrOr("value", ""); got != lang {
			t.Errorf("picker shows %q chosen, want %q", got, lang)
		}
	}
	want(page("/login", ""), "en", "Skip to main content")
	want(page("/login", "zh-CN,zh;q=0.9,en;q=0.8"), "zh-CN", "跳到主要内容")
	want(page("/login", "fr-FR"), "en", "Skip to main content")

	// A visitor's choice (a cookie) beats the browser's.
	r := a.post(t, c, "/language", url.Values{"lang": {"en"}, "back": {"/login"}})
	wantRedirect(t, r, "/login")
	want(page("/login", "zh-CN"), "en", "Skip to main content")

	// Signed in, the choice is saved with the user and follows them.
	a.login(t, c, "customer@example.com")
	r = a.post(t, c, "/language", url.Values{"lang": {"zh-CN"}, "back": {"/runs?x=1"}})
	wantRedirect(t, r, "/runs?x=1")
	want(page("/", "en-US"), "zh-CN", "跳到主要内容")
	var saved string
	if err := a.db.Get(&saved, `SELECT language FROM users WHERE email = 'customer@example.com'`); err != nil {
		t.Fatal(err)
	}
	if saved != "zh-CN" {
		t.Errorf("users.language = %q, want zh-CN", saved)
	}
	other := a.client(t)
	a.login(t, other, "customer@example.com")
	if got := a.get(t, other, "/").doc(t).Find("html").AttrOr("lang", ""); got != "zh-CN" {
		t.Errorf("another browser of the same user: lang %q, want zh-CN", got)
	}
}

// TestLanguage_Refusals: a language not offered is refused in words and
// nothing is saved; a page to return to on another site returns home.
func TestLanguage_Refusals(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "support@example.com")
	for _, lang := range []string{"", "de", "zh", "xx-YY-ZZZZZZZZZ", "en;q=1"} {
		r := a.post(t, c, "/language", url.Values{"lang": {lang}, "back": {"/"}})
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if got := r.doc(t).Find("main").Text(); !strings.Contains(got, "That language is not offered") {
			t.Errorf("lang %q: page says %q", lang, got)
		}
	}
	var saved string
	if err := a.db.Get(&saved, `SELECT language FROM users WHERE email = 'support@example.com'`); err != nil {
		t.Fatal(err)
	}
	if saved != "" {
		t.Errorf("after refusals users.language = %q, want none", saved)
	}
	wantRedirect(t, a.post(t, c, "/language", url.Values{"lang": {"zh-CN"}, "back": {"//evil.example/"}}), "/")
}

// TestLanguage_RunStatusInTheViewersWords: a run's status word is the
// words table's in the viewer's language: the same run reads in Chinese
// to a browser that asks for it and in English to one that does not.
func TestLanguage_RunStatusInTheViewersWords(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	status := func(accept string) (state, word string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, a.srv.URL+"/runs/"+a.run.ID.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept-Language", accept)
		r := do(t, c, req)
		wantStatus(t, r, http.StatusOK)
		d := r.doc(t)
		return d.Find("#run-status").AttrOr("data-state", ""), strings.TrimSpace(d.Find("#run-state").Text())
	}
	state, en := status("en-US")
	_, zh := status("zh-CN,zh;q=0.9")
	keys := map[string]string{store.StateCreated: "status.created", store.StatePlanning: "status.planning",
		store.StateAwaitingApproval: "status.awaiting_approval", store.StateSubmitting: "status.submitting",
		store.StateReconciling: "status.reconciling"}
	key, ok := keys[state]
	if !ok {
		t.Fatalf("the run is %q, want one still going", state)
	}
	if want := views.English.T(key); en != want {
		t.Errorf("English status = %q, want %q", en, want)
	}
	if want := views.Catalogues.Choose("", "zh-CN").T(key); zh != want || zh == en {
		t.Errorf("Chinese status = %q, want %q", zh, want)
	}
}

// langTransport sends every request with an Accept-Language, as a
// browser set to that language does (its EventSource requests too).
type langTransport struct{ lang string }

func (l langTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Accept-Language", l.lang)
	return http.DefaultTransport.RoundTrip(req)
}

// TestLanguage_StreamSpeaksItsPagesLanguage: the run page's stream sends
// its fragments in the language of the browser that opened it, while the
// same run's stream opened in English stays English.
func TestLanguage_StreamSpeaksItsPagesLanguage(t *testing.T) {
	t.Parallel()
	a := newStreamApp(t, handlers.Config{}, withListener())
	c := a.customerClient(t)
	zhClient := &http.Client{Jar: c.Jar, Transport: langTransport{"zh-CN,zh;q=0.9"}}
	path := "/runs/" + a.run.ID.String() + "/events?after=" + strconv.FormatInt(a.lastSeq(t), 10)
	zh, en := a.open(t, zhClient, path, ""), a.open(t, c, path, "")
	if zh.res.StatusCode != http.StatusOK || en.res.StatusCode != http.StatusOK {
		t.Fatalf("streams answered %d and %d", zh.res.StatusCode, en.res.StatusCode)
	}
	if _, err := a.store.Transition(context.Background(), a.run.ID, store.StateCreated, store.StatePlanning,
		store.EventOf(store.RunPlanning{})); err != nil {
		t.Fatal(err)
	}
	zhWord, enWord := views.Catalogues.Choose("", "zh-CN").T("status.planning"), views.English.T("status.planning")
	if got := zh.next(t).Data; !strings.Contains(got, zhWord) || strings.Contains(got, enWord) {
		t.Errorf("the zh-CN stream's fragment does not say %q in Chinese only:\n%s", zhWord, got)
	}
	if got := en.next(t).Data; !strings.Contains(got, enWord) || strings.Contains(got, zhWord) {
		t.Errorf("the English stream's fragment does not say %q:\n%s", enWord, got)
	}
}

package handlers_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"testing"

	"github.com/refundd/refundd/handlers"
)

var (
	readmeFamilyBody = regexp.MustCompile(`-d '(\{"refunds":.*\})'`)
	readmeKey        = regexp.MustCompile(`-H 'Idempotency-Key: ([^']+)'`)
)

// TestReadme_FamilyRecipeStartsAFamily posts README's family recipe, its
// body and key as written, as the demo customer its token belongs to: a
// parent with a child per refund, the same family again on a repeat, and
// a snapshot that lists the children.
func TestReadme_FamilyRecipeStartsAFamily(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	body := readmeFamilyBody.FindSubmatch(readme)
	if body == nil {
		t.Fatal(`README has no family recipe (curl … -d '{"refunds":…}')`)
	}
	start := readmeFamilyBody.FindIndex(readme)[0]
	keys := readmeKey.FindAllSubmatch(readme[:start], -1)
	if len(keys) == 0 {
		t.Fatal("README's family recipe sends no Idempotency-Key")
	}
	key := string(keys[len(keys)-1][1])
	var want struct {
		Refunds []struct {
			OrderID int64 `json:"order_id"`
			Amount  int64 `json:"amount"`
		} `json:"refunds"`
	}
	if err := json.Unmarshal(body[1], &want); err != nil {
		t.Fatalf("README's family body %s: %v", body[1], err)
	}

	a := newApp(t, handlers.Config{})
	c := a.client(t)
	a.login(t, c, "customer@example.com")
	r := a.apiStart(t, c, key, string(body[1]))
	wantStatus(t, r, http.StatusCreated)
	fam := decode[familyJSON](t, r)
	if fam.Kind != "request" || len(fam.Children) != len(want.Refunds) {
		t.Fatalf("README's recipe started %s", r.body)
	}
	for i, ch := range fam.Children {
		if ch.OrderID != want.Refunds[i].OrderID || ch.Amount != want.Refunds[i].Amount {
			t.Errorf("child %d = %+v, want README's refund %+v", i+1, ch, want.Refunds[i])
		}
	}
	again := a.apiStart(t, c, key, string(body[1]))
	wantStatus(t, again, http.StatusOK)
	if got := decode[familyJSON](t, again).ID; got != fam.ID {
		t.Errorf("README's recipe sent again started %s, want the same request %s", got, fam.ID)
	}
	snap := a.get(t, c, "/api/runs/"+fam.ID.String())
	wantStatus(t, snap, http.StatusOK)
	if got := len(decode[familySnapshotJSON](t, snap).Children); got != len(want.Refunds) {
		t.Errorf("the request's snapshot lists %d children, want %d", got, len(want.Refunds))
	}
}

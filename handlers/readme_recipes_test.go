package handlers_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/agent"
	"github.com/refundd/refundd/handlers"
	"github.com/refundd/refundd/internal/testkit"
	"github.com/refundd/refundd/payments"
	"github.com/refundd/refundd/store"
	"github.com/refundd/refundd/views"
)

// recipe is one of README's fault recipes: the provider's fault settings
// it PUTs, and the words it says the customer's run page shows, in order.
type recipe struct {
	name   string
	faults string   // the JSON body of the PUT
	words  []string // quoted in README
}

var (
	recipeStart = regexp.MustCompile(`^# "([a-z ]+)": `)
	recipePut   = regexp.MustCompile(`^curl -s -X PUT -d '(\{.*\})' \$P/admin/faults`)
	quoted      = regexp.MustCompile(`"([^"]+)"`)
)

// readmeRecipes reads the recipes from README's fault section: a comment
// that starts `# "name": `, its following comment lines, then the curl
// line that sets the faults.
func readmeRecipes(t *testing.T) []recipe {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out  []recipe
		text []string // the comment of the recipe being read
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case recipeStart.MatchString(line):
			text = []string{strings.TrimPrefix(line, "# ")}
		case text != nil && strings.HasPrefix(line, "# "):
			text = append(text, strings.TrimPrefix(line, "# "))
		case text != nil && recipePut.MatchString(line):
			all := quoted.FindAllStringSubmatch(strings.Join(text, " "), -1)
			r := recipe{name: all[0][1], faults: recipePut.FindStringSubmatch(line)[1]}
			for _, q := range all[1:] {
				r.words = append(r.words, q[1])
			}
			out = append(out, r)
			text = nil
		default:
			text = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadme_RecipesShowTheirWords runs each of README's fault recipes
// against the real executor and simulated provider, setting the faults
// through the provider's own HTTP switch with README's JSON, and reads the
// customer's run page until it has shown each quoted sentence, in order.
func TestReadme_RecipesShowTheirWords(t *testing.T) {
	t.Parallel()
	a := newApp(t, handlers.Config{}, withExecutor(agent.Builtin{Words: views.Answers{}}, payments.Faults{}))
	sim := httptest.NewServer(a.sim.Handler())
	t.Cleanup(sim.Close)
	o := &outcomeApp{app: a, customer: a.client(t), approver: a.client(t)}
	a.login(t, o.customer, "customer@example.com")
	a.login(t, o.approver, "approver@example.com")
	steps := map[string]func(*recipeRun, *testing.T){
		"declined":  (*recipeRun).approve,
		"verifying": (*recipeRun).approve,
		"too late":  (*recipeRun).cancelOnceSent,
		"canceled":  (*recipeRun).cancelBeforeApproval,
	}
	recipes := readmeRecipes(t)
	if len(recipes) != len(steps) {
		t.Errorf("README has %d recipes, want %d (%v)", len(recipes), len(steps), recipes)
	}
	for _, rc := range recipes {
		t.Run(rc.name, func(t *testing.T) {
			step, ok := steps[rc.name]
			if !ok || len(rc.words) == 0 {
				t.Fatalf("README's recipe %q: no steps for it here, or it quotes no words", rc.name)
			}
			putFaults(t, sim.URL, a.sim.Secret(), rc.faults)
			r := &recipeRun{o: o, run: o.startAwaiting(t), want: rc.words}
			step(r, t)
			r.readUntilSaid(t)
		})
	}
}

// putFaults sets the simulated provider's faults as README's curl does,
// with the provider's secret.
func putFaults(t *testing.T, base, secret, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, base+"/admin/faults", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /admin/faults %s: %s", body, res.Status)
	}
}

// recipeRun is one recipe's run, and the words its page has yet to show.
type recipeRun struct {
	o     *outcomeApp
	run   *store.Run
	want  []string
	seen  []string // each different page read, for the failure message
	ended bool
	last  time.Time
}

func (r *recipeRun) approve(t *testing.T) {
	r.o.decide(t, r.o.approver, r.run.ID, "approve", nil)
}

func (r *recipeRun) cancelBeforeApproval(t *testing.T) {
	r.o.decide(t, r.o.customer, r.run.ID, "cancel", nil)
}

// cancelOnceSent approves, waits until the page has said that the refund
// can no longer be canceled, and cancels anyway.
func (r *recipeRun) cancelOnceSent(t *testing.T) {
	r.approve(t)
	r.readUntil(t, "the page to say the refund can no longer be canceled", func() bool {
		return len(r.want) == 0 || !strings.Contains(r.want[0], "can no longer be canceled")
	})
	r.o.decide(t, r.o.customer, r.run.ID, "cancel", nil)
}

// readUntilSaid reads the customer's page until it has shown every word,
// in order, and the run has ended.
func (r *recipeRun) readUntilSaid(t *testing.T) {
	r.readUntil(t, "the page to say README's words and the run to end", func() bool { return len(r.want) == 0 && r.ended })
}

// readUntil reads the customer's page, crossing off the words it shows in
// order, until done holds.
func (r *recipeRun) readUntil(t *testing.T, what string, done func() bool) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("the page had yet to say %q; it said, in turn:\n%s", r.want, strings.Join(r.seen, "\n"))
		}
	}()
	testkit.WaitUntil(t, what, 90*time.Second, func() bool {
		// A page a fifth of a second: the page shows each state for
		// longer, and a busy machine has better to do.
		if time.Since(r.last) >= 200*time.Millisecond {
			r.last = time.Now()
			r.read(t)
		}
		return done()
	})
}

// read reads the customer's page once.
func (r *recipeRun) read(t *testing.T) {
	doc := r.o.page(t, r.o.customer, r.run.ID).doc(t)
	text := squash(doc.Find("#run").Text())
	if len(r.seen) == 0 || r.seen[len(r.seen)-1] != text {
		r.seen = append(r.seen, text)
	}
	for len(r.want) > 0 && strings.Contains(text, r.want[0]) {
		text = text[strings.Index(text, r.want[0])+len(r.want[0]):]
		r.want = r.want[1:]
	}
	state, _ := doc.Find("#run-status").Attr("data-state")
	r.ended = store.Terminal(state)
}

package main

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServe_HealthListenerRefusesBodies: a GET /healthz carrying a body,
// on the health listener (HEALTH_ADDR) as on ADDR, is refused unread: a
// 20 KB nested JSON body sent there used to take 333 MB.
func TestServe_HealthListenerRefusesBodies(t *testing.T) {
	t.Parallel()
	p := startSeededServe(t, map[string]string{"HEALTH_ADDR": "127.0.0.1:0"})
	var health string
	for health == "" {
		select {
		case line := <-p.out:
			if rest, ok := strings.CutPrefix(line, "Health checks at "); ok {
				health = strings.Fields(rest)[0]
			}
		case <-time.After(10 * time.Second):
			t.Fatal("serve did not say where its health checks listen")
		}
	}
	body := `{"email":` + strings.Repeat("[", 10000) + "1" + strings.Repeat("]", 10000) + "}"
	for _, base := range []string{health, p.url} {
		req, err := http.NewRequest(http.MethodGet, base+"/healthz", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(res.Body).ReadString('\n')
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s/healthz with a body = %d, want 400; %s", base, res.StatusCode, line)
		}
	}
}

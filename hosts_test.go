package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestServe_AllowedHosts: ALLOWED_HOSTS reaches the web server. A request
// addressed to another name gets 421, one to the listed name is served,
// and health checks answer whatever the Host.
func TestServe_AllowedHosts(t *testing.T) {
	t.Parallel()
	p := startSeededServe(t, map[string]string{"ALLOWED_HOSTS": "refunds.example.com"})
	defer p.stop()
	for _, tc := range []struct {
		host, path string
		status     int
	}{
		{"refunds.example.com", "/login", http.StatusOK},
		{strings.TrimPrefix(p.url, "http://"), "/login", http.StatusMisdirectedRequest},
		{"attacker.example", "/login", http.StatusMisdirectedRequest},
		{"10.0.0.7", "/healthz", http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, p.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("GET %s with Host %s = %d, want %d", tc.path, tc.host, res.StatusCode, tc.status)
		}
	}
}

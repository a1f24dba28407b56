// Package hostname reads the name a request was addressed to, the one
// way the web server and the simulated provider check their Host headers.
package hostname

import (
	"net"
	"strings"
)

// Of is a Host header's or a setting's name alone: no port, no IPv6
// brackets, lower case, no trailing dot.
func Of(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

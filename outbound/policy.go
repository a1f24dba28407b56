package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Policy says which webhook URLs refundd may call: in `serve`, https only,
// and never an address that is loopback, private, link-local, unspecified,
// multicast or a cloud metadata address, unless AllowHosts names the host
// (WEBHOOK_ALLOW_HOSTS). The address is checked where it is used, at
// connect time after DNS (Dialer), so a name that resolves elsewhere later
// (DNS rebinding) is refused then too; Check refuses what it can at
// registration, with words for the admin.
type Policy struct {
	// AllowHTTP lets http:// URLs through (dev).
	AllowHTTP bool
	// AllowLoopback lets loopback addresses through (dev).
	AllowLoopback bool
	// AllowHosts are host names or IP addresses (WEBHOOK_ALLOW_HOSTS)
	// allowed whatever their addresses are.
	AllowHosts []string
	// LookupIP resolves a name; nil: net.DefaultResolver (tests name
	// their own).
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// ErrRefusedURL is what Check and the dialer refuse with.
var ErrRefusedURL = errors.New("outbound: refused webhook address")

// Check refuses, in words an admin understands, a URL the policy does not
// allow: its scheme, its form, and every address its host resolves to now.
func (p Policy) Check(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrRefusedURL, raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	default:
		return fmt.Errorf("%w: the URL must start with https://", ErrRefusedURL)
	}
	if u.User != nil {
		return fmt.Errorf("%w: the URL must not carry a user name or password", ErrRefusedURL)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%w: the URL must not have a #fragment", ErrRefusedURL)
	}
	host := u.Hostname()
	if p.allowedHost(host) {
		return nil
	}
	addrs, err := p.lookup(ctx, host)
	if err != nil {
		return fmt.Errorf("%w: %s does not resolve: %v", ErrRefusedURL, host, err)
	}
	for _, a := range addrs {
		if err := p.checkAddr(a); err != nil {
			return err
		}
	}
	return nil
}

func (p Policy) allowedHost(host string) bool {
	return slices.ContainsFunc(p.AllowHosts, func(h string) bool { return strings.EqualFold(h, host) })
}

func (p Policy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if p.LookupIP != nil {
		return p.LookupIP(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// metadata are the cloud providers' instance metadata addresses that are
// not already link-local (AWS, GCP and Azure use 169.254.169.254; AWS's
// IPv6 one and Alibaba's are named here).
var metadata = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
}

// cgnat is shared address space (RFC 6598), private in all but name.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func (p Policy) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%w: %s is a loopback address", ErrRefusedURL, a)
	case slices.Contains(metadata, a) || a == netip.MustParseAddr("169.254.169.254"):
		return fmt.Errorf("%w: %s is a cloud metadata address", ErrRefusedURL, a)
	case a.IsPrivate() || cgnat.Contains(a):
		return fmt.Errorf("%w: %s is a private address", ErrRefusedURL, a)
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return fmt.Errorf("%w: %s is a link-local address", ErrRefusedURL, a)
	case a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is not a unicast address", ErrRefusedURL, a)
	}
	return nil
}

// Dialer returns a dialer for webhook deliveries that checks, at connect
// time, the address the name resolved to: DNS rebinding cannot turn an
// allowed name into a private address after registration.
func (p Policy) Dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := &net.Dialer{Timeout: timeout}
		if !p.allowedHost(host) {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("%w: %s", ErrRefusedURL, address)
				}
				return p.checkAddr(ap.Addr())
			}
		}
		return d.DialContext(ctx, network, addr)
	}
}

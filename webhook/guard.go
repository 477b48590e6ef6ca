package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// Guard keeps webhooks away from addresses a customer must not be able to
// reach through us (SSRF): loopback, private, link-local, CGNAT, multicast,
// reserved and cloud-metadata addresses, in IPv4 and IPv6, and every port but
// 443. It checks URLs when reminders are scheduled and, because DNS can
// change in between, every connection after resolution.
type Guard struct {
	// AllowLoopback lets webhooks reach loopback addresses on any port, over
	// plain http too: a development setting for a receiver on the same machine.
	AllowLoopback bool
}

// ErrForbiddenAddress is returned for a destination the guard refuses.
var ErrForbiddenAddress = errors.New("forbidden webhook destination")

// blocked lists the ranges beyond the netip predicates (loopback, private,
// link-local, multicast, unspecified) that are never a customer's receiver.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT (and Alibaba's metadata, 100.100.100.200)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (Oracle's metadata, 192.0.0.192)
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// nat64 embeds an IPv4 address in its last 32 bits; the embedded one counts.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// CheckAddr refuses an address and port a webhook must not reach.
func (g Guard) CheckAddr(ip netip.Addr, port int) error {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if ip.IsLoopback() && g.AllowLoopback {
		return nil
	}
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsUnspecified() {
		return fmt.Errorf("%w: %s is not a public address", ErrForbiddenAddress, ip)
	}
	for _, p := range blocked {
		if p.Contains(ip) {
			return fmt.Errorf("%w: %s is a reserved address", ErrForbiddenAddress, ip)
		}
	}
	if port != 443 {
		return fmt.Errorf("%w: port %d (webhooks go to 443)", ErrForbiddenAddress, port)
	}
	return nil
}

// CheckURL checks a webhook URL at schedule time: https on port 443 (plain
// http and other ports only to loopback, when allowed), and a host that is
// not, nor resolves to, a forbidden address. A name that does not resolve
// now is accepted; the connection-time check still applies when it is sent.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("is not an absolute URL")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return errors.New("has an invalid port")
		}
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.checkEndpoint(u.Scheme, ip, port)
	}
	if host == "localhost" {
		return g.checkEndpoint(u.Scheme, netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
	}
	if u.Scheme != "https" {
		return errors.New("must use https")
	}
	if port != 443 {
		return fmt.Errorf("must use port 443, not %d", port)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil // unresolvable now; checked again at connection time
	}
	for _, ip := range addrs {
		if err := g.CheckAddr(ip, port); err != nil {
			return fmt.Errorf("resolves to a forbidden address (%v)", err)
		}
	}
	return nil
}

func (g Guard) checkEndpoint(scheme string, ip netip.Addr, port int) error {
	if scheme != "https" && !(g.AllowLoopback && ip.Unmap().IsLoopback()) {
		return errors.New("must use https")
	}
	if err := g.CheckAddr(ip, port); err != nil {
		return fmt.Errorf("is not an allowed destination (%v)", err)
	}
	return nil
}

// control runs on every connection after DNS resolution and before connect,
// so a name that later points somewhere forbidden is still refused.
func (g Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
	}
	return g.CheckAddr(ap.Addr(), int(ap.Port()))
}

// Transport is an HTTP transport for webhooks: no proxy (a proxy would hide
// the destination from the guard), every connection checked by the guard.
func (g Guard) Transport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: Timeout,
	}
}

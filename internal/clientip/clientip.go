// Package clientip says which client a request came from. Behind a reverse
// proxy every request arrives from the proxy's address; the proxy names the
// client in X-Forwarded-For, a header any client can also write. So the
// header is read only when the peer is a proxy the operator trusts
// (SHIPNOTIFY_TRUSTED_PROXIES), and only as far as trusted proxies wrote it.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds a request's client: the peer's address, or, when the peer
// is a trusted proxy, the right-most X-Forwarded-For address that is not
// itself a trusted proxy. The zero Resolver trusts no proxy.
type Resolver struct {
	trusted []netip.Prefix
}

// New trusts the proxies in prefixes (a single address is a /32 or /128).
func New(prefixes ...netip.Prefix) Resolver {
	r := Resolver{}
	for _, p := range prefixes {
		r.trusted = append(r.trusted, netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked())
	}
	return r
}

// unmappedBits is p's length once its address is unmapped (::ffff:10.0.0.0/104
// is 10.0.0.0/8).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// Parse reads a comma-separated list of addresses and CIDR prefixes, as
// SHIPNOTIFY_TRUSTED_PROXIES holds it ("" trusts none). An error names the
// entry by its position and text.
func Parse(list string) (Resolver, error) {
	var prefixes []netip.Prefix
	if strings.TrimSpace(list) == "" {
		return Resolver{}, nil
	}
	for i, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return Resolver{}, fmt.Errorf("entry %d is empty (want addresses or CIDR prefixes, comma-separated)", i+1)
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return Resolver{}, fmt.Errorf("entry %d %q: want a CIDR prefix like 10.0.0.0/8 or fd00::/8", i+1, entry)
			}
			if p != p.Masked() {
				return Resolver{}, fmt.Errorf("entry %d %q: host bits are set; did you mean %s?", i+1, entry, p.Masked())
			}
			prefixes = append(prefixes, p)
			continue
		}
		a, err := netip.ParseAddr(entry)
		if err != nil || a.Zone() != "" {
			return Resolver{}, fmt.Errorf("entry %d %q: want an IP address like 10.0.0.7 or a CIDR prefix like 10.0.0.0/8", i+1, entry)
		}
		prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return New(prefixes...), nil
}

// Trusts reports whether a is a trusted proxy.
func (r Resolver) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the address req came from. A peer that is not a trusted proxy
// is the client whatever its headers say, so no client can choose its own
// address. From a trusted proxy, X-Forwarded-For is read from the right
// (the nearest hop's entry first) to the first address that is not a
// trusted proxy; the entries left of it were written by the client and are
// ignored. If every entry is a trusted proxy, or one is not an address, the
// last trusted hop read is the client. An unreadable peer is the zero Addr.
func (r Resolver) Client(req *http.Request) netip.Addr {
	client := peer(req.RemoteAddr)
	if !client.IsValid() || !r.Trusts(client) {
		return client
	}
	hops := strings.Split(strings.Join(req.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := forwarded(hops[i])
		if !hop.IsValid() {
			return client
		}
		client = hop
		if !r.Trusts(hop) {
			return client
		}
	}
	return client
}

// peer is the address of a RemoteAddr ("host:port", or a bare address).
func peer(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// forwarded is one X-Forwarded-For entry's address: a bare address, or
// one with a port as some proxies write it ("192.0.2.1:4711",
// "[2001:db8::1]:4711").
func forwarded(entry string) netip.Addr {
	entry = strings.TrimSpace(entry)
	if a, err := netip.ParseAddr(entry); err == nil {
		return a.Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}

// Unit is what a client is charged as: its IPv4 address, or its IPv6 /64
// (one host's share; a host that holds a /64 could otherwise take a fresh
// address for every guess).
func Unit(a netip.Addr) netip.Prefix {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	p, _ := a.Prefix(a.BitLen())
	return p
}

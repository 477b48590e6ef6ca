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
	"strings"
	"sync"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Guard keeps webhooks away from addresses a customer must not be able to
// reach through us (SSRF). An address passes only if the IANA special-purpose
// address registries leave it to the public internet: loopback, private,
// link-local, CGNAT, multicast, documentation, benchmarking, reserved and
// cloud-metadata addresses are refused, and in IPv6 everything outside global
// unicast (2000::/3), so IPv4-compatible ::/96, IPv4-translated (SIIT)
// ::ffff:0:0:0/96 and local-use NAT64 64:ff9b:1::/48 too, as well as 6to4
// (2002::/16) and Teredo (2001::/32), which tunnel to an IPv4 address the
// guard cannot see. An IPv4-mapped address is judged as its IPv4 address, and
// one in the well-known NAT64 prefix 64:ff9b::/96 as the IPv4 address it
// embeds, so a worker behind DNS64 still reaches public IPv4 receivers. Only
// port 443. It checks URLs when reminders are scheduled and, because DNS can
// change in between, every connection after resolution.
type Guard struct {
	// AllowLoopback lets webhooks reach loopback addresses on any port, over
	// plain http too: a development setting for a receiver on the same machine.
	AllowLoopback bool
	// Resolver looks webhook hosts up at schedule time (nil means
	// net.DefaultResolver); tests give a stub. Connections resolve on their
	// own and are checked after resolution whatever this is.
	Resolver Resolver
	// LookupDeadline bounds all the schedule-time lookups of one CheckURLs
	// call together, so an update naming 500 slow hosts costs one deadline,
	// not minutes (0 means DefaultLookupDeadline).
	LookupDeadline time.Duration
}

// Resolver is the lookup the guard needs; *net.Resolver has it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ResolverFunc lets a function serve as a Resolver, as a stub in tests.
type ResolverFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// LookupNetIP calls f with the host; the network is always "ip" here.
func (f ResolverFunc) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	return f(ctx, host)
}

// DefaultLookupDeadline is how long the schedule-time lookups of one update
// may take together.
const DefaultLookupDeadline = 10 * time.Second

// lookupTimeout bounds one host's lookup. A host that does not answer within
// it counts as unresolvable now, which the schedule-time check accepts: the
// connection-time check still applies.
const lookupTimeout = 3 * time.Second

// lookupConcurrency bounds the lookups in flight for one CheckURLs call.
const lookupConcurrency = 32

// ErrForbiddenAddress is returned for a destination the guard refuses.
var ErrForbiddenAddress = errors.New("forbidden webhook destination")

// ErrLookupDeadline is returned for a URL whose host had not been looked up
// when the call's lookup deadline passed: it was not checked, so it is
// refused, and trying again later may pass.
var ErrLookupDeadline = errors.New("could not be checked in time")

// registry holds the IANA special-purpose registries, kept by code.dny.dev/ssrf
// (generated from the registries); ports and networks are the guard's own
// business, so the library judges addresses only.
var registry = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

// nat64 is the well-known NAT64 prefix (RFC 6052): it embeds an IPv4 address
// in its last 32 bits, and that address is what the translator reaches.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// CheckAddr refuses an address and port a webhook must not reach. Its
// error names the address, for the operator: it is used at connection time.
func (g Guard) CheckAddr(ip netip.Addr, port int) error {
	switch g.judgeAddr(ip, port) {
	case nonPublic:
		return fmt.Errorf("%w: %s is not a public address", ErrForbiddenAddress, ip)
	case wrongPort:
		return fmt.Errorf("%w: port %d (webhooks go to 443)", ErrForbiddenAddress, port)
	}
	return nil
}

type addrVerdict int

const (
	allowed addrVerdict = iota
	nonPublic
	wrongPort
)

func (g Guard) judgeAddr(ip netip.Addr, port int) addrVerdict {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case !ip.IsValid():
		return nonPublic
	case ip.IsLoopback() && g.AllowLoopback:
		return allowed
	case registry.SafeAddr(ip) != nil:
		return nonPublic
	case port != 443:
		return wrongPort
	}
	return allowed
}

// CheckURL checks one webhook URL at schedule time, as CheckURLs does.
func (g Guard) CheckURL(ctx context.Context, raw string) error {
	return g.CheckURLs(ctx, []string{raw})[0]
}

// CheckURLs checks webhook URLs at schedule time and answers one verdict per
// URL, nil for allowed: https on port 443 (plain http and other ports only to
// loopback, when allowed), and a host that is not, nor resolves to, a
// forbidden address. The distinct host names are looked up concurrently under
// one deadline (LookupDeadline); a URL whose lookup has not finished by then
// gets ErrLookupDeadline. A name that does not resolve now is accepted; the
// connection-time check still applies when it is sent. The verdict on a name
// never says which address it resolved to: that would turn scheduling into a
// view of our internal DNS.
func (g Guard) CheckURLs(ctx context.Context, raws []string) []error {
	verdicts, hosts, byHost := g.sortURLs(raws)
	if len(hosts) == 0 {
		return verdicts
	}
	for j, err := range g.lookUp(ctx, hosts) {
		for _, i := range byHost[hosts[j]] {
			verdicts[i] = err
		}
	}
	return verdicts
}

// CheckSyntax checks what a URL says, without looking its host up: the
// scheme, the port and a literal address, as CheckURL would. A
// configuration is checked with it, before anything connects.
func (g Guard) CheckSyntax(raw string) error {
	_, err := g.checkSyntax(raw)
	return err
}

// Hosts are the host names CheckURLs would look up for raws, each once,
// without looking anything up: a caller charges the lookups before they
// are made. A URL its syntax decides (a literal address, localhost, a
// wrong scheme or port) needs none.
func (g Guard) Hosts(raws []string) []string {
	_, hosts, _ := g.sortURLs(raws)
	return hosts
}

// sortURLs decides what the URLs' syntax decides, and gathers the rest by
// host name (in lower case: one host spelt two ways is one lookup).
func (g Guard) sortURLs(raws []string) (verdicts []error, hosts []string, byHost map[string][]int) {
	verdicts = make([]error, len(raws))
	byHost = map[string][]int{}
	for i, raw := range raws {
		host, err := g.checkSyntax(raw)
		if err != nil || host == "" {
			verdicts[i] = err
			continue
		}
		host = strings.ToLower(host)
		if _, ok := byHost[host]; !ok {
			hosts = append(hosts, host)
		}
		byHost[host] = append(byHost[host], i)
	}
	return verdicts, hosts, byHost
}

// checkSyntax checks what a URL says without looking anything up. It
// returns the host name still to be looked up, or "" when the URL is
// decided (a literal address, or localhost).
func (g Guard) checkSyntax(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", errors.New("is not an absolute URL")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return "", errors.New("has an invalid port")
		}
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		return "", g.checkEndpoint(u.Scheme, ip, port)
	}
	if host == "localhost" {
		return "", g.checkEndpoint(u.Scheme, netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
	}
	if u.Scheme != "https" {
		return "", errors.New("must use https")
	}
	if port != 443 {
		return "", fmt.Errorf("must use port 443, not %d", port)
	}
	return host, nil
}

// checkEndpoint judges a literal address without repeating it: the URL is
// the customer's and may be personal data.
func (g Guard) checkEndpoint(scheme string, ip netip.Addr, port int) error {
	if scheme != "https" && !(g.AllowLoopback && ip.Unmap().IsLoopback()) {
		return errors.New("must use https")
	}
	switch g.judgeAddr(ip, port) {
	case nonPublic:
		return errors.New("is not an allowed destination: not a public address")
	case wrongPort:
		return fmt.Errorf("must use port 443, not %d", port)
	}
	return nil
}

// lookUp resolves hosts, at most lookupConcurrency at a time, and judges
// what each resolves to. It returns by the deadline even if the resolver
// does not: lookups still running then are left to finish unheard.
func (g Guard) lookUp(ctx context.Context, hosts []string) []error {
	deadline := g.LookupDeadline
	if deadline <= 0 {
		deadline = DefaultLookupDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var resolver Resolver = net.DefaultResolver
	if g.Resolver != nil {
		resolver = g.Resolver
	}

	var mu sync.Mutex // guards verdicts, finished and closed
	verdicts := make([]error, len(hosts))
	finished := make([]bool, len(hosts))
	closed := false
	allDone := make(chan struct{})
	go func() {
		defer close(allDone)
		sem := make(chan struct{}, lookupConcurrency)
		var wg sync.WaitGroup
		defer wg.Wait()
		for j, host := range hosts {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				verdict := g.judge(ctx, resolver, host)
				if ctx.Err() != nil {
					return // cut short by the deadline: not checked
				}
				mu.Lock()
				defer mu.Unlock()
				if !closed {
					verdicts[j], finished[j] = verdict, true
				}
			})
		}
	}()
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	closed = true
	for j := range hosts {
		if !finished[j] {
			verdicts[j] = fmt.Errorf("%w: the update's webhook hosts could not all be looked up within %s; try again", ErrLookupDeadline, deadline)
		}
	}
	return verdicts
}

// judge looks one host up and refuses it if any of its addresses is
// forbidden, without saying which.
func (g Guard) judge(ctx context.Context, resolver Resolver, host string) error {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil // unresolvable now; checked again at connection time
	}
	for _, ip := range addrs {
		if g.judgeAddr(ip, 443) != allowed {
			return errors.New("resolves to a non-public address")
		}
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

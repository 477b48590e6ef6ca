package webhook_test

import (
	"context"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/shipnotify/shipnotify/webhook"
)

// Whatever the URL, the guard never accepts a non-https scheme, a port but
// 443, or a literal address it would refuse at connection time.
// Seeds: testdata/fuzz/FuzzGuardURL.
func FuzzGuardURL(f *testing.F) {
	f.Add("https://hooks.example.com/in")
	// Names resolve to a public address, so the verdict rests on the URL
	// alone and no lookup leaves the machine.
	public := webhook.ResolverFunc(func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	})
	f.Fuzz(func(t *testing.T, raw string) {
		if err := (webhook.Guard{Resolver: public}).CheckURL(context.Background(), raw); err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted an unparsable URL %q", raw)
		}
		if u.Scheme != "https" {
			t.Fatalf("accepted scheme %q", u.Scheme)
		}
		if p := u.Port(); p != "" && p != "443" {
			if n, _ := strconv.Atoi(p); n != 443 {
				t.Fatalf("accepted port %q", p)
			}
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := (webhook.Guard{}).CheckAddr(ip, 443); err != nil {
				t.Fatalf("accepted forbidden address %s: %v", ip, err)
			}
		}
	})
}

package clientip_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shipnotify/shipnotify/internal/clientip"
)

// request is a request from peer carrying X-Forwarded-For headers xff.
func request(peer string, xff ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = peer
	for _, v := range xff {
		req.Header.Add("X-Forwarded-For", v)
	}
	return req
}

// The client is the right-most X-Forwarded-For address that is not a
// trusted proxy, read only when the peer is one: entries a client wrote
// itself (left of its own address) and headers from an untrusted peer are
// ignored, so no client can choose the address it is charged to.
func TestTheClientIsTheFirstUntrustedHop(t *testing.T) {
	t.Parallel()
	r, err := clientip.Parse("10.0.0.0/8, 192.0.2.10 ,fd00::/8")
	require.NoError(t, err)
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy in between", "198.51.100.7:4711", nil, "198.51.100.7"},
		{"an untrusted peer's header is ignored", "198.51.100.7:4711", []string{"203.0.113.1"}, "198.51.100.7"},
		{"a trusted proxy names its peer", "10.1.2.3:4711", []string{"198.51.100.7"}, "198.51.100.7"},
		{"what the client wrote left of itself is ignored", "10.1.2.3:4711", []string{"203.0.113.1, 198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies", "10.1.2.3:4711", []string{"203.0.113.1, 198.51.100.7, 192.0.2.10, 10.9.9.9"}, "198.51.100.7"},
		{"headers are read as one list", "10.1.2.3:4711", []string{"203.0.113.1", "198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"no header: the proxy itself", "10.1.2.3:4711", nil, "10.1.2.3"},
		{"every hop trusted: the farthest", "10.1.2.3:4711", []string{"192.0.2.10, 10.9.9.9"}, "192.0.2.10"},
		{"a garbled hop stops the walk at the last trusted one", "10.1.2.3:4711", []string{"198.51.100.7, bogus, 10.9.9.9"}, "10.9.9.9"},
		{"entries with ports", "10.1.2.3:4711", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"IPv6 proxies and mapped addresses", "[fd00::1]:4711", []string{"::ffff:198.51.100.7"}, "198.51.100.7"},
		{"a mapped peer is its IPv4 address", "[::ffff:10.1.2.3]:4711", []string{"198.51.100.7"}, "198.51.100.7"},
	} {
		require.Equal(t, netip.MustParseAddr(c.want), r.Client(request(c.peer, c.xff...)), c.name)
	}

	var none clientip.Resolver
	require.Equal(t, netip.MustParseAddr("10.1.2.3"), none.Client(request("10.1.2.3:4711", "198.51.100.7")), "the zero Resolver trusts no one")
	require.False(t, none.Client(request("not an address")).IsValid())
}

// A list that is not addresses and prefixes is refused, naming the entry;
// an empty list trusts no proxy.
func TestParseRefusesWhatIsNotAnAddressOrPrefix(t *testing.T) {
	t.Parallel()
	r, err := clientip.Parse(" ")
	require.NoError(t, err)
	require.False(t, r.Trusts(netip.MustParseAddr("127.0.0.1")))

	for list, want := range map[string]string{
		"10.0.0.0/8,proxy.internal": `entry 2 "proxy.internal": want an IP address`,
		"10.0.0.0/33":               `entry 1 "10.0.0.0/33": want a CIDR prefix`,
		"10.0.0.1/8":                `entry 1 "10.0.0.1/8": host bits are set; did you mean 10.0.0.0/8?`,
		"10.0.0.1,,10.0.0.2":        "entry 2 is empty",
		"fe80::1%eth0":              `entry 1 "fe80::1%eth0": want an IP address`,
	} {
		_, err := clientip.Parse(list)
		require.ErrorContains(t, err, want, list)
	}
}

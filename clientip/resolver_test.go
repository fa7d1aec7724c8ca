package clientip

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

var proxies = []string{"10.0.0.0/8", "192.0.2.7", "fd00::/8", "::ffff:172.16.0.0/108"}

func mustNew(t testing.TB, trusted []string) *Resolver {
	t.Helper()
	r, err := New(trusted)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRejectsBadEntries(t *testing.T) {
	for _, bad := range []string{"", "10.0.0.0/33", "not-an-ip", "10.0.0.1:80", "fe80::/129", "[::1]"} {
		_, err := New([]string{"10.0.0.0/8", bad})
		var fe *sluice.FieldError
		if !errors.As(err, &fe) || fe.Field != "trusted_proxies" || !errors.Is(err, sluice.ErrInvalidRule) {
			t.Errorf("New(%q) = %v, want a FieldError on trusted_proxies", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "entry 1") {
			t.Errorf("New(%q) error %q does not point at entry 1", bad, err)
		}
	}
}

func TestNewNormalizesEntries(t *testing.T) {
	r := mustNew(t, []string{" 10.1.2.3/8 ", "::ffff:192.0.2.0/120", "2001:db8::1"})
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"10.200.0.1", true}, {"11.0.0.1", false},
		{"192.0.2.200", true}, {"::ffff:192.0.2.1", true}, {"192.0.3.1", false},
		{"2001:db8::1", true}, {"2001:db8::2", false},
	} {
		a, _ := parseNode(tc.addr)
		if got := r.Trusted(a); got != tc.want {
			t.Errorf("Trusted(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	r := mustNew(t, proxies)
	for _, tc := range []struct {
		name        string
		remote      string
		xff, fwd    []string
		want        string // "" for the zero Addr
		nilResolver bool
	}{
		// The peer is the client unless it is trusted.
		{name: "untrusted peer ignores XFF", remote: "203.0.113.9:5555", xff: []string{"1.1.1.1"}, want: "203.0.113.9"},
		{name: "untrusted peer ignores Forwarded", remote: "203.0.113.9:5555", fwd: []string{"for=1.1.1.1"}, want: "203.0.113.9"},
		{name: "nil resolver trusts nobody", remote: "10.0.0.1:1", xff: []string{"1.1.1.1"}, want: "10.0.0.1", nilResolver: true},
		{name: "trusted peer without headers", remote: "10.0.0.1:1", want: "10.0.0.1"},
		{name: "bare remote address", remote: "203.0.113.9", want: "203.0.113.9"},
		{name: "bracketed remote", remote: "[2001:db8::1]:443", want: "2001:db8::1"},
		{name: "mapped remote", remote: "[::ffff:203.0.113.9]:443", want: "203.0.113.9"},
		{name: "zoned remote", remote: "[fe80::1%eth0]:443", want: "fe80::1"},
		{name: "unix socket remote", remote: "@", want: ""},
		{name: "empty remote", remote: "", want: ""},

		// X-Forwarded-For, right to left past trusted hops.
		{name: "one proxy", remote: "10.0.0.1:1", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "spoofed left entries ignored", remote: "10.0.0.1:1", xff: []string{"1.1.1.1, 8.8.8.8, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "spoof of a trusted address passes to the real client", remote: "10.0.0.1:1", xff: []string{"10.9.9.9, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "chain of trusted proxies", remote: "10.0.0.1:1", xff: []string{"1.1.1.1, 203.0.113.9, 192.0.2.7, 10.3.3.3"}, want: "203.0.113.9"},
		{name: "spoof on its own line", remote: "10.0.0.1:1", xff: []string{"1.1.1.1", "203.0.113.9, 10.3.3.3"}, want: "203.0.113.9"},
		{name: "lines read last first", remote: "10.0.0.1:1", xff: []string{"10.2.2.2", "203.0.113.9"}, want: "203.0.113.9"},
		{name: "walk crosses lines", remote: "10.0.0.1:1", xff: []string{"203.0.113.9", "10.2.2.2"}, want: "203.0.113.9"},
		{name: "all hops trusted", remote: "10.0.0.1:1", xff: []string{"10.4.4.4, 10.3.3.3"}, want: "10.4.4.4"},
		{name: "entry with port", remote: "10.0.0.1:1", xff: []string{"203.0.113.9:4711"}, want: "203.0.113.9"},
		{name: "bracketed IPv6 with port", remote: "10.0.0.1:1", xff: []string{"[2001:db8::9]:4711"}, want: "2001:db8::9"},
		{name: "bare IPv6", remote: "10.0.0.1:1", xff: []string{"2001:db8::9"}, want: "2001:db8::9"},
		{name: "mapped entry", remote: "10.0.0.1:1", xff: []string{"::ffff:203.0.113.9"}, want: "203.0.113.9"},
		{name: "mapped trusted hop", remote: "10.0.0.1:1", xff: []string{"203.0.113.9, ::ffff:172.16.0.5"}, want: "203.0.113.9"},
		{name: "IPv6 proxy", remote: "[fd00::1]:1", xff: []string{"203.0.113.9"}, want: "203.0.113.9"},
		{name: "tabs and spaces", remote: "10.0.0.1:1", xff: []string{" \t203.0.113.9\t "}, want: "203.0.113.9"},

		// Malformed entries stop the walk at the last trustworthy address.
		{name: "garbage after trusted peer", remote: "10.0.0.1:1", xff: []string{"1.1.1.1, garbage"}, want: "10.0.0.1"},
		{name: "garbage after trusted hop", remote: "10.0.0.1:1", xff: []string{"1.1.1.1, garbage, 10.3.3.3"}, want: "10.3.3.3"},
		{name: "empty entry", remote: "10.0.0.1:1", xff: []string{"1.1.1.1,,10.3.3.3"}, want: "10.3.3.3"},
		{name: "trailing comma", remote: "10.0.0.1:1", xff: []string{"1.1.1.1,"}, want: "10.0.0.1"},
		{name: "empty header", remote: "10.0.0.1:1", xff: []string{""}, want: "10.0.0.1"},
		{name: "unknown", remote: "10.0.0.1:1", xff: []string{"unknown"}, want: "10.0.0.1"},
		{name: "bad port", remote: "10.0.0.1:1", xff: []string{"1.1.1.1:http"}, want: "10.0.0.1"},
		{name: "port too long", remote: "10.0.0.1:1", xff: []string{"1.1.1.1:123456"}, want: "10.0.0.1"},
		{name: "IPv4 in brackets", remote: "10.0.0.1:1", xff: []string{"[1.1.1.1]"}, want: "10.0.0.1"},
		{name: "unclosed bracket", remote: "10.0.0.1:1", xff: []string{"[2001:db8::1"}, want: "10.0.0.1"},
		{name: "host name", remote: "10.0.0.1:1", xff: []string{"example.com"}, want: "10.0.0.1"},
		{name: "quotes in XFF", remote: "10.0.0.1:1", xff: []string{`"1.1.1.1"`}, want: "10.0.0.1"},
		{name: "oversized entry", remote: "10.0.0.1:1", xff: []string{strings.Repeat(" ", 600) + "1.1.1.1"}, want: "10.0.0.1"},
		{name: "oversized left part not read", remote: "10.0.0.1:1", xff: []string{strings.Repeat("x", 1<<20) + ", 203.0.113.9"}, want: "203.0.113.9"},
		{name: "hop limit", remote: "10.0.0.1:1", xff: []string{"1.1.1.1, " + strings.Repeat("10.0.0.2, ", 40) + "10.0.0.3"}, want: "10.0.0.2"},

		// Forwarded (RFC 7239).
		{name: "forwarded", remote: "10.0.0.1:1", fwd: []string{"for=203.0.113.9;proto=https"}, want: "203.0.113.9"},
		{name: "forwarded case", remote: "10.0.0.1:1", fwd: []string{"proto=https; FOR=203.0.113.9 ;by=10.0.0.1"}, want: "203.0.113.9"},
		{name: "forwarded quoted v6 with port", remote: "10.0.0.1:1", fwd: []string{`for="[2001:db8:cafe::17]:4711"`}, want: "2001:db8:cafe::17"},
		{name: "forwarded spoof ignored", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1, for=203.0.113.9"}, want: "203.0.113.9"},
		{name: "forwarded chain", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1, for=203.0.113.9;by=x, for=10.5.5.5"}, want: "203.0.113.9"},
		{name: "forwarded lines", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1", "for=203.0.113.9"}, want: "203.0.113.9"},
		{name: "forwarded comma in quotes", remote: "10.0.0.1:1", fwd: []string{`for=1.1.1.1, for=10.5.5.5;host="a,b"`}, want: "1.1.1.1"},
		{name: "forwarded unbalanced quote", remote: "10.0.0.1:1", fwd: []string{`for=1.1.1.1, for="10.5.5.5`}, want: "10.0.0.1"},
		{name: "forwarded unknown", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1, for=unknown"}, want: "10.0.0.1"},
		{name: "forwarded obfuscated", remote: "10.0.0.1:1", fwd: []string{"for=_hidden"}, want: "10.0.0.1"},
		{name: "forwarded obfuscated port", remote: "10.0.0.1:1", fwd: []string{`for="[2001:db8::1]:_p"`}, want: "10.0.0.1"},
		{name: "forwarded without for", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1, proto=http"}, want: "10.0.0.1"},
		{name: "forwarded two fors", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1;for=203.0.113.9"}, want: "10.0.0.1"},
		{name: "forwarded escaped quote", remote: "10.0.0.1:1", fwd: []string{`for="1.1.1.\1"`}, want: "10.0.0.1"},
		{name: "forwarded pair without value", remote: "10.0.0.1:1", fwd: []string{"for=1.1.1.1;secure"}, want: "10.0.0.1"},

		// Both headers: they must agree.
		{name: "both agree", remote: "10.0.0.1:1", xff: []string{"203.0.113.9"}, fwd: []string{"for=203.0.113.9"}, want: "203.0.113.9"},
		{name: "forged Forwarded beside XFF", remote: "10.0.0.1:1", xff: []string{"203.0.113.9"}, fwd: []string{"for=1.1.1.1"}, want: "10.0.0.1"},
		{name: "forged XFF beside Forwarded", remote: "10.0.0.1:1", xff: []string{"1.1.1.1"}, fwd: []string{"for=203.0.113.9"}, want: "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r
			if tc.nilResolver {
				res = nil
			}
			got := res.Resolve(tc.remote, tc.xff, tc.fwd)
			if tc.want == "" {
				if got.IsValid() {
					t.Fatalf("Resolve = %v, want the zero Addr", got)
				}
				return
			}
			if want := netip.MustParseAddr(tc.want); got != want {
				t.Fatalf("Resolve = %v, want %v", got, want)
			}
		})
	}
}

func TestFromRequest(t *testing.T) {
	r := mustNew(t, proxies)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.1:1234"
	req.Header.Add("X-Forwarded-For", "1.1.1.1")
	req.Header.Add("X-Forwarded-For", "203.0.113.9, 10.7.7.7")
	if got := r.FromRequest(req); got != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("FromRequest = %v", got)
	}
}

func TestResolveDoesNotAllocate(t *testing.T) {
	r := mustNew(t, proxies)
	xff := []string{"1.1.1.1, [2001:db8::9]:80, 10.3.3.3"}
	fwd := []string{`for=1.1.1.1, for="[2001:db8::9]:80", for=10.3.3.3;proto=https`}
	var got netip.Addr
	allocs := testing.AllocsPerRun(100, func() { got = r.Resolve("10.0.0.1:1", xff, fwd) })
	if allocs != 0 {
		t.Errorf("Resolve allocates %v times per call", allocs)
	}
	if got != netip.MustParseAddr("2001:db8::9") {
		t.Errorf("Resolve = %v", got)
	}
}

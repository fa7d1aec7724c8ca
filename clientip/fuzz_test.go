package clientip

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzResolve feeds arbitrary peer addresses and header text to Resolve and checks the
// properties a rate limiter relies on: nothing panics; an untrusted peer is the client whatever
// the headers say; the result is normalized; and whatever a client writes to the left of the
// entry a trusted proxy appends, on the same line or on lines of its own, the client resolved
// is the one the proxy saw.
func FuzzResolve(f *testing.F) {
	for _, s := range []struct{ remote, xff, fwd string }{
		{"10.0.0.1:1", "1.1.1.1, 203.0.113.9", ""},
		{"10.0.0.1:1", "", `for=1.1.1.1, for="[2001:db8::1]:80";proto=https`},
		{"[fd00::1]:1", "garbage,,10.2.2.2", `for="unbalanced`},
		{"203.0.113.9:1", "1.1.1.1", "for=1.1.1.1"},
		{"@", "", ""},
		{"10.0.0.1:1", `"a,b", [::ffff:1.2.3.4]:9`, `host="x;y", for=_hidden`},
	} {
		f.Add(s.remote, s.xff, s.fwd)
	}
	r, err := New(proxies)
	if err != nil {
		f.Fatal(err)
	}
	real := netip.MustParseAddr("203.0.113.9")
	realV6 := netip.MustParseAddr("2001:db8:77::9")
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		lines := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\n")
		}
		got := r.Resolve(remote, lines(xff), lines(fwd))
		peer, ok := parseNode(remote)
		switch {
		case !ok:
			if got.IsValid() {
				t.Fatalf("Resolve(%q) = %v for an unparsable peer", remote, got)
			}
		case !r.Trusted(peer) && got != peer:
			t.Fatalf("untrusted peer %v resolved to %v", peer, got)
		case !got.IsValid() || got.Is4In6() || got.Zone() != "":
			t.Fatalf("Resolve = %v, not a normalized address", got)
		}

		// A trusted proxy appends the client it saw to whatever the client sent.
		proxy := "10.0.0.1:443"
		for _, forged := range [][]string{{xff + ", " + real.String()}, {xff, real.String()}} {
			if got := r.Resolve(proxy, forged, nil); got != real {
				t.Fatalf("X-Forwarded-For %q resolved to %v, want %v", forged, got, real)
			}
		}
		appended := `for="[` + realV6.String() + `]:5000"`
		for _, forged := range [][]string{{fwd + ", " + appended}, {fwd, appended}} {
			if got := r.Resolve(proxy, nil, forged); got != realV6 {
				t.Fatalf("Forwarded %q resolved to %v, want %v", forged, got, realV6)
			}
		}
	})
}

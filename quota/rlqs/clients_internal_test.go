package rlqs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// TestStreamCapProperty (issue 31, item 7) drives the admission of streams (admit, over the
// keys PeerIdentity names) with random opens and closes from an attacker holding a whole
// IPv6 /64 and a few IPv4 addresses, which opens streams first, and a crowd of Envoys, each
// on its own address, and checks, after every step, the whole class of lock-outs:
//   - no client key holds more than its cap, so one IPv6 host, whatever address of its
//     /64 it uses, holds at most MaxStreamsPerClient;
//   - the streams beyond each client's first never take more than MaxStreams less the
//     newcomers' streams, so those are left to first streams;
//   - an Envoy with no stream open is always admitted unless newcomers-many clients already
//     hold a stream each: however many streams the attacker holds, its addresses alone
//     cannot take the newcomers' streams from an Envoy not yet seen.
func TestStreamCapProperty(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 31))
		maxStreams, perClient := 50+r.IntN(200), 10+r.IntN(40)
		newcomers := maxStreams * DefaultNewcomerStreams / 100
		key := PeerIdentity(DefaultIPv6Prefix)
		open := map[string]int{}
		total := 0
		var held []string // the key of each open stream
		attacker6 := netip.MustParsePrefix("2001:db8:aa:bb::/64")
		for step := 0; step < 5000; step++ {
			var addr string
			envoy := false
			op := r.IntN(20)
			if step < 1000 {
				op = r.IntN(16) // the attacker comes first
			}
			switch {
			case op < 10: // the attacker, from any address of its /64
				a := attacker6.Addr().As16()
				for i := 8; i < 16; i++ {
					a[i] = byte(r.IntN(256))
				}
				addr = net.JoinHostPort(netip.AddrFrom16(a).String(), "443")
			case op < 16: // the attacker's IPv4 addresses, a few of them
				addr = fmt.Sprintf("198.51.100.%d:443", r.IntN(4))
			case op < 18: // Envoys, one IPv6 /64 each
				addr = fmt.Sprintf("[2001:db8:%x::1]:443", r.IntN(30))
				envoy = true
			default: // a stream ends
				if len(held) > 0 {
					i := r.IntN(len(held))
					open[held[i]]--
					total--
					held = append(held[:i], held[i+1:]...)
				}
				continue
			}
			k := key(peer.NewContext(context.Background(), &peer.Peer{Addr: tcpAddr(t, addr)}))
			reason, refused := admit(total, open[k], maxStreams, perClient, newcomers)
			active := 0
			for _, n := range open {
				if n > 0 {
					active++
				}
			}
			if envoy && open[k] == 0 && refused && active < newcomers {
				t.Fatalf("seed %d step %d: a new Envoy refused (%v) with %d of %d streams open by %d clients (newcomers %d)", seed, step, reason, total, maxStreams, active, newcomers)
			}
			if refused {
				continue
			}
			open[k]++
			total++
			held = append(held, k)
			beyondFirst := 0
			for kk, n := range open {
				if n > perClient {
					t.Fatalf("seed %d step %d: client %s holds %d streams, cap %d", seed, step, kk, n, perClient)
				}
				beyondFirst += max(n-1, 0)
			}
			if beyondFirst > maxStreams-newcomers {
				t.Fatalf("seed %d step %d: %d streams beyond clients' first, more than %d - %d newcomers", seed, step, beyondFirst, maxStreams, newcomers)
			}
			if n := open[key(peer.NewContext(context.Background(), &peer.Peer{Addr: tcpAddr(t, "[2001:db8:aa:bb:ffff::1]:1")}))]; n > perClient {
				t.Fatalf("seed %d: the attacker's /64 holds %d streams", seed, n)
			}
		}
	}
}

func tcpAddr(t *testing.T, s string) net.Addr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPeerIdentity: a verified client certificate names the client whatever its address;
// without one, IPv6 addresses of one /64 are one client, IPv4 addresses (mapped into IPv6
// too) each their own.
func TestPeerIdentity(t *testing.T) {
	key := PeerIdentity(0)
	at := func(addr string, info credentials.AuthInfo) string {
		return key(peer.NewContext(context.Background(), &peer.Peer{Addr: tcpAddr(t, addr), AuthInfo: info}))
	}
	spiffe, _ := url.Parse("spiffe://example.org/envoy")
	verified := func(c *x509.Certificate) credentials.AuthInfo {
		return credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}}
	}
	for _, tc := range []struct {
		addr string
		info credentials.AuthInfo
		want string
	}{
		{"[2001:db8::1]:1", nil, "ip6:2001:db8::/64"},
		{"[2001:db8::ffff:1234]:2", nil, "ip6:2001:db8::/64"},
		{"[2001:db8:0:1::1]:2", nil, "ip6:2001:db8:0:1::/64"},
		{"192.0.2.7:9", nil, "ip:192.0.2.7"},
		{"[::ffff:192.0.2.7]:9", nil, "ip:192.0.2.7"},
		{"192.0.2.7:9", verified(&x509.Certificate{URIs: []*url.URL{spiffe}, DNSNames: []string{"envoy.local"}}), "cert:spiffe://example.org/envoy"},
		{"[2001:db8::1]:1", verified(&x509.Certificate{DNSNames: []string{"envoy.local"}}), "cert:envoy.local"},
		{"192.0.2.8:9", verified(&x509.Certificate{Raw: []byte("x")}), "cert:sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"},
		// A certificate the handshake did not verify names nobody.
		{"192.0.2.9:9", credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{{DNSNames: []string{"liar"}}}}}, "ip:192.0.2.9"},
	} {
		if got := at(tc.addr, tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := PeerIdentity(48)(peer.NewContext(context.Background(), &peer.Peer{Addr: tcpAddr(t, "[2001:db8:1:2::1]:1")})); got != "ip6:2001:db8:1::/48" {
		t.Errorf("/48: %q", got)
	}
}

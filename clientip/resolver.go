package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice"
)

// MaxHops is the most header entries a Resolver reads per request. A request that would need
// more (a chain of more trusted proxies than this) resolves to the last trusted proxy reached,
// so an oversized header costs bounded work.
const MaxHops = 32

// maxEntryLen bounds the length of one X-Forwarded-For entry or Forwarded element; a longer one
// is malformed and stops the walk.
const maxEntryLen = 512

// Resolver finds client addresses behind a fixed set of trusted proxies. It is immutable and
// safe for concurrent use. The zero value and a nil *Resolver trust no proxy: the client is the
// connection's peer and forwarding headers are ignored.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a Resolver trusting the given proxies, each a CIDR ("10.0.0.0/8", "fd00::/8") or
// a bare address ("192.0.2.7"). IPv4-mapped IPv6 entries are stored as IPv4. A bad entry is a
// *sluice.FieldError (wrapping sluice.ErrInvalidRule) naming the field "trusted_proxies".
func New(trustedProxies []string) (*Resolver, error) {
	r := &Resolver{trusted: make([]netip.Prefix, 0, len(trustedProxies))}
	for i, s := range trustedProxies {
		p, err := parseTrusted(strings.TrimSpace(s))
		if err != nil {
			return nil, &sluice.FieldError{Field: "trusted_proxies",
				Reason: fmt.Sprintf("entry %d %q: %v", i, s, err), Err: sluice.ErrInvalidRule}
		}
		r.trusted = append(r.trusted, p)
	}
	return r, nil
}

// parseTrusted parses one trusted-proxy entry into a masked prefix, unmapping IPv4-mapped
// IPv6 prefixes of at least 96 bits.
func parseTrusted(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		a = normalize(a)
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Trusted reports whether a is one of the trusted proxies.
func (r *Resolver) Trusted(a netip.Addr) bool {
	if r == nil {
		return false
	}
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// FromRequest returns the client address of r: Resolve of its RemoteAddr and its
// X-Forwarded-For and Forwarded header values.
func (r *Resolver) FromRequest(req *http.Request) netip.Addr {
	return r.FromHeader(req.RemoteAddr, req.Header)
}

// FromHeader returns the client address of a request from the peer remoteAddr with header h
// (canonical keys, as net/http and Connect give them): Resolve of remoteAddr and h's
// X-Forwarded-For and Forwarded values.
func (r *Resolver) FromHeader(remoteAddr string, h http.Header) netip.Addr {
	return r.Resolve(remoteAddr, h["X-Forwarded-For"], h["Forwarded"])
}

// Resolve returns the client address given the connection's peer address (remoteAddr, as in
// http.Request.RemoteAddr or a gRPC peer: "host:port", "[v6]:port" or a bare address) and the
// X-Forwarded-For and Forwarded header values as received (one string per header line).
//
// The peer is the client unless it is trusted; then the forwarding headers are walked right to
// left past trusted hops (see the package documentation). When a request carries both headers,
// both are walked and must name the same client: if they do not, one of them was written by the
// client and the Resolver cannot tell which, so the client is the peer itself. (Configure
// proxies to write one of the two headers, or to drop the other.) The result is the zero Addr
// only when remoteAddr is not an IP address (a Unix socket, say). Resolve does not allocate.
func (r *Resolver) Resolve(remoteAddr string, xForwardedFor, forwarded []string) netip.Addr {
	peer, ok := parseNode(remoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if !r.Trusted(peer) {
		return peer
	}
	switch {
	case len(xForwardedFor) > 0 && len(forwarded) > 0:
		x := r.walk(peer, hops{lines: xForwardedFor})
		f := r.walk(peer, hops{lines: forwarded, forwarded: true})
		if x == f {
			return x
		}
		return peer
	case len(xForwardedFor) > 0:
		return r.walk(peer, hops{lines: xForwardedFor})
	case len(forwarded) > 0:
		return r.walk(peer, hops{lines: forwarded, forwarded: true})
	}
	return peer
}

// walk follows h right to left from the trusted peer: each entry was written by the hop after
// it, so it is believed only while that hop is trusted.
func (r *Resolver) walk(peer netip.Addr, h hops) netip.Addr {
	h.start()
	client := peer
	for range MaxHops {
		if !r.Trusted(client) {
			return client
		}
		a, ok := h.next()
		if !ok {
			return client
		}
		client = a
	}
	return client
}

// normalize unmaps IPv4-mapped IPv6 addresses and drops zones, so one client has one form.
func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

package grpclimit

import (
	"context"
	"net"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/clientip"
)

// KeyIP keys a call by its client's IP address: the connection's peer or, when the peer is
// one of r's trusted proxies, the client its x-forwarded-for and forwarded metadata name,
// walked right to left past trusted hops only (clientip.Resolver.Resolve), so a client cannot
// choose its own key by sending those entries itself. IPv6 clients are grouped by their first
// v6PrefixBits bits (0: clientip.DefaultIPv6PrefixBits, a /64). A nil r trusts no proxy. A
// call whose peer is not an IP address (a Unix socket) has no key.
func KeyIP(r *clientip.Resolver, v6PrefixBits int) Key {
	return func(ctx context.Context, _ string, dst []byte) ([]byte, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return dst, false
		}
		if tcp, ok := p.Addr.(*net.TCPAddr); ok {
			// The usual case, a TCP peer that is no trusted proxy, without formatting the
			// address for Resolve to parse back, nor reading the metadata.
			if a := tcp.AddrPort().Addr().Unmap().WithZone(""); a.IsValid() && !r.Trusted(a) {
				return clientip.AppendKey(dst, a, v6PrefixBits), true
			}
		}
		var xff, fwd []string
		if r != nil {
			xff = metadata.ValueFromIncomingContext(ctx, "x-forwarded-for")
			fwd = metadata.ValueFromIncomingContext(ctx, "forwarded")
		}
		a := r.Resolve(p.Addr.String(), xff, fwd)
		if !a.IsValid() {
			return dst, false
		}
		return clientip.AppendKey(dst, a, v6PrefixBits), true
	}
}

package connectlimit

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Call is what a Key reads of a call: its Spec, its Peer (on a handler, the client's address;
// on a client, the server's host) and its request header (a client's stream writes it later).
type Call struct {
	Spec   connect.Spec
	Peer   connect.Peer
	Header http.Header
}

// Key says what a limit counts calls by, in grpclimit's vocabulary, or your own: it appends
// call's key to dst, ok false when the call has none (the limit does not apply). It must be
// safe for concurrent use; one that panics fails the call with CodeInternal, logged.
type Key func(ctx context.Context, call Call, dst []byte) (key []byte, ok bool)

// KeyProcedure keys a call by its procedure, "/pkg.Service/Method" (grpclimit's KeyMethod).
func KeyProcedure() Key {
	return func(_ context.Context, c Call, dst []byte) ([]byte, bool) {
		return append(dst, c.Spec.Procedure...), true
	}
}

// KeyHeader keys a call by the first value of its request header name (gRPC metadata too); a
// call without one has no key. Key by a client's value only once your authentication checked it.
func KeyHeader(name string) Key {
	name = http.CanonicalHeaderKey(name)
	return func(_ context.Context, c Call, dst []byte) ([]byte, bool) {
		if v := c.Header[name]; len(v) > 0 && v[0] != "" {
			return append(dst, v[0]...), true
		}
		return dst, false
	}
}

// KeyIP keys a handler's call by its client's IP address: the peer, or the client that a
// trusted proxy of r names in X-Forwarded-For or Forwarded (clientip.Resolver.FromHeader; a nil
// r trusts none), IPv6 grouped by its first v6PrefixBits bits (0: a /64).
func KeyIP(r *clientip.Resolver, v6PrefixBits int) Key {
	return func(_ context.Context, c Call, dst []byte) ([]byte, bool) {
		if a := r.FromHeader(c.Peer.Addr, c.Header); a.IsValid() {
			return clientip.AppendKey(dst, a, v6PrefixBits), true
		}
		return dst, false
	}
}

// Keys combines keys: calls are counted by all of them together; a call missing one has no
// key. Each part is written with its length (grpclimit.Keys'), so parts cannot run together.
func Keys(parts ...Key) Key { return rpclimit.Join(parts) }

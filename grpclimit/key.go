package grpclimit

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Key says what a limit counts calls by, as httplimit.Key does for HTTP requests, with the
// same vocabulary: KeyIP, KeyMethod, KeyMetadata (HTTP's KeyHeader), combined with Keys.
// A Key appends the key of a call to the full method fullMethod to dst and returns it, with
// ok false when the call has no such key (the limit then does not apply to it). ctx is the
// call's context: on a server, the incoming metadata and the peer; on a client, whatever the
// caller's context carries. A Key must be safe for concurrent use. A Key that panics fails
// the call with codes.Internal (logged) rather than the process.
type Key func(ctx context.Context, fullMethod string, dst []byte) (key []byte, ok bool)

// KeyMetadata keys a call by the first value of the incoming metadata entry name (matched
// case-insensitively, as gRPC metadata keys are lower case), such as an API key or a tenant
// ID. A call without the entry, or with an empty value, has no key. The value is whatever the
// client sent: key by it only after your authentication checked it, or a client can spend
// another's budget by sending its key.
func KeyMetadata(name string) Key {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string, dst []byte) ([]byte, bool) {
		vs := metadata.ValueFromIncomingContext(ctx, name)
		if len(vs) == 0 || vs[0] == "" {
			return dst, false
		}
		return append(dst, vs[0]...), true
	}
}

// KeyMethod keys a call by its full method name, "/pkg.Service/Method": one budget per method.
func KeyMethod() Key {
	return func(_ context.Context, fullMethod string, dst []byte) ([]byte, bool) {
		return append(dst, fullMethod...), true
	}
}

// Keys combines keys: calls are counted by all of them together, such as the client's API
// key and the method: one budget per combination. A call missing one of them has no key. Each part is written
// with its length ("7:tenant1|12:/pkg.S/Write"), so parts that contain the separator cannot
// make two combinations share a key.
func Keys(parts ...Key) Key { return rpclimit.Join(parts) }

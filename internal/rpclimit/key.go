package rpclimit

import (
	"context"
	"slices"
	"strconv"
)

// Join returns the key of parts together: each part's key in turn, separated by '|', each
// written with its length ("7:tenant1|12:/pkg.S/Write"), so that parts holding the separator
// cannot make two combinations share a key; a call missing one part has none. It is the Keys
// of grpclimit and connectlimit; it keeps a copy of parts.
func Join[K ~func(context.Context, C, []byte) ([]byte, bool), C any](parts []K) Key[C] {
	parts = slices.Clone(parts)
	return func(ctx context.Context, call C, dst []byte) ([]byte, bool) {
		base := len(dst)
		for i, part := range parts {
			if i > 0 {
				dst = append(dst, '|')
			}
			start := len(dst)
			var ok bool
			if dst, ok = part(ctx, call, dst); !ok {
				return dst[:base], false
			}
			dst = prefixLength(dst, start)
		}
		return dst, true
	}
}

// prefixLength inserts the length of dst[start:] and a colon before it.
func prefixLength(dst []byte, start int) []byte {
	var buf [21]byte
	prefix := append(strconv.AppendInt(buf[:0], int64(len(dst)-start), 10), ':')
	dst = append(dst, prefix...)
	copy(dst[start+len(prefix):], dst[start:len(dst)-len(prefix)])
	copy(dst[start:], prefix)
	return dst
}

package httplimit

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/sluicehq/sluice/clientip"
)

// Key says what a policy counts requests by. The zero Key is KeyIP. Keys are values: build
// them once with the Key functions and share them freely.
type Key struct{ parts []keyPart }

type partKind uint8

const (
	partIP partKind = iota
	partHeader
	partRoute
	partMethod
	partFunc
)

type keyPart struct {
	kind   partKind
	header string // canonical header name, for partHeader
	fn     func(r *http.Request) (string, bool)
}

// KeyIP counts requests by client address: the connection's peer, or behind trusted proxies
// (WithResolver) the first untrusted hop of X-Forwarded-For or Forwarded; IPv6 clients are
// grouped by prefix (WithIPv6Prefix, default /64).
func KeyIP() Key { return Key{parts: []keyPart{{kind: partIP}}} }

// KeyHeader counts requests by the first value of a request header, such as an API key. A
// request without the header (or with an empty one) is not counted by the policy (layer an IP
// policy to limit those).
// Values longer than 64 bytes are replaced by a hash, so a client cannot make keys the store
// refuses.
func KeyHeader(name string) Key {
	return Key{parts: []keyPart{{kind: partHeader, header: http.CanonicalHeaderKey(name)}}}
}

// KeyRoute counts requests by route pattern, r.Pattern of http.ServeMux (Go 1.22 patterns
// such as "GET /items/{id}"), so all items share one count. A request no pattern matched
// counts under "(none)": random paths cannot create keys.
func KeyRoute() Key { return Key{parts: []keyPart{{kind: partRoute}}} }

// KeyMethod counts requests by HTTP method.
func KeyMethod() Key { return Key{parts: []keyPart{{kind: partMethod}}} }

// KeyFunc counts requests by the key f returns; ok false leaves the request uncounted by the
// policy. A panic in f is recovered and logged, and the request is left uncounted.
func KeyFunc(f func(r *http.Request) (key string, ok bool)) Key {
	return Key{parts: []keyPart{{kind: partFunc, fn: f}}}
}

// Keys combines keys: requests are counted by all of them together (per client and route,
// say). A request missing one part is not counted by the policy.
func Keys(keys ...Key) Key {
	var k Key
	for _, p := range keys {
		if len(p.parts) == 0 {
			p = KeyIP()
		}
		k.parts = append(k.parts, p.parts...)
	}
	return k
}

// maxPartLen is the longest key part written as is; longer values are hashed.
const maxPartLen = 64

// noRoute is the route key of a request no pattern matched.
const noRoute = "(none)"

// appendKey appends the key text of r to dst: the parts separated by '|'. ok is false when a
// part is missing.
func (k Key) appendKey(dst []byte, r *http.Request, m *middleware) ([]byte, bool) {
	parts := k.parts
	if len(parts) == 0 {
		parts = ipParts
	}
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, '|')
		}
		switch p.kind {
		case partIP:
			dst = clientip.AppendKey(dst, m.resolver.FromRequest(r), m.v6Bits)
		case partHeader:
			v := r.Header[p.header]
			if len(v) == 0 || v[0] == "" {
				return dst, false
			}
			dst = appendPart(dst, v[0])
		case partRoute:
			dst = appendPart(dst, m.pattern(r))
		case partMethod:
			dst = appendPart(dst, r.Method)
		case partFunc:
			v, ok := m.callKeyFunc(p.fn, r)
			if !ok {
				return dst, false
			}
			dst = appendPart(dst, v)
		}
	}
	return dst, true
}

var ipParts = []keyPart{{kind: partIP}}

// appendPart appends a client-supplied value, escaping '%' and '|' so parts cannot run into
// each other, or "#" and a hash of it when it is longer than maxPartLen.
func appendPart(dst []byte, v string) []byte {
	if len(v) > maxPartLen {
		sum := sha256.Sum256([]byte(v))
		dst = append(dst, '#')
		return hex.AppendEncode(dst, sum[:16])
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '%':
			dst = append(dst, "%25"...)
		case '|':
			dst = append(dst, "%7C"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

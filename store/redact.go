package store

import (
	"net/url"
	"strings"
)

// Redact returns the store URL rawURL fit for logs: a password, in the userinfo or in a
// password query parameter (Sentinel's data nodes), is replaced by "xxxxx"; the rest (the
// scheme, hosts, database, other parameters) is kept. It works on URLs with several hosts,
// which net/url does not parse.
func Redact(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(authority[:at], ":"); hasPass {
			authority = user + ":xxxxx" + authority[at:]
		}
	}
	if q := strings.IndexByte(path, '?'); q >= 0 {
		query, frag, hasFrag := strings.Cut(path[q+1:], "#")
		params := strings.Split(query, "&")
		for i, p := range params {
			name, _, _ := strings.Cut(p, "=")
			if n, err := url.QueryUnescape(name); err == nil && strings.EqualFold(n, "password") {
				params[i] = name + "=xxxxx"
			}
		}
		path = path[:q+1] + strings.Join(params, "&")
		if hasFrag {
			path += "#" + frag
		}
	}
	return scheme + "://" + authority + path
}

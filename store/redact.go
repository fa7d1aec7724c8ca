package store

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact returns the store URL rawURL fit for logs: a password, in the userinfo or in a
// password query parameter (Sentinel's data nodes), is replaced by "xxxxx", as is the
// userinfo's password wherever else the URL repeats it; the rest (the
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
	userinfo, hosts := "", authority
	password := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hosts = authority[:at+1], authority[at+1:]
		if user, pw, hasPass := strings.Cut(authority[:at], ":"); hasPass {
			userinfo, password = user+":xxxxx@", pw
		}
	}
	if password != "" {
		// The same password anywhere else in the URL (a host, path or parameter repeating it).
		hosts = strings.ReplaceAll(hosts, password, "xxxxx")
		path = strings.ReplaceAll(path, password, "xxxxx")
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
	// "password=" anywhere else (a host, a fragment, a path segment) is masked too: a log line is no
	// place to find out whether a mistyped URL made it a parameter.
	hosts = passwordRE.ReplaceAllString(hosts, "${1}xxxxx")
	path = passwordRE.ReplaceAllString(path, "${1}xxxxx")
	return scheme + "://" + userinfo + hosts + path
}

var passwordRE = regexp.MustCompile(`(?i)(password=)[^&#/?]*`)

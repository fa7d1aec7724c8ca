package store

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact returns the store URL rawURL fit for logs: a password, in the userinfo or in a
// password query parameter (Sentinel's data nodes), is replaced by "xxxxx", as are the
// userinfo's password wherever else the URL repeats it (the scheme and user included) and the
// value of "password=" wherever it stands; the rest (hosts, database, other parameters) is
// kept. It works on URLs with several hosts, which net/url does not parse.
func Redact(rawURL string) string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return mask(rawURL, "")
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
			userinfo, password = mask(user, pw)+":xxxxx@", pw
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
	return mask(scheme, password) + "://" + userinfo + mask(hosts, password) + mask(path, password)
}

// mask hides, in one part of a URL, the userinfo's password (when not empty) wherever the part
// repeats it, and the value of "password=" wherever it stands (a host, a fragment, a path
// segment, even the scheme): a log line is no place to find out whether a mistyped URL made
// it a parameter.
func mask(part, password string) string {
	if password != "" {
		part = strings.ReplaceAll(part, password, "xxxxx")
	}
	return passwordRE.ReplaceAllString(part, "${1}xxxxx")
}

var passwordRE = regexp.MustCompile(`(?i)(password=)[^&#/?]*`)

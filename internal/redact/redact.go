// Package redact makes what may hold a credential fit for a log line, a page or an error: an
// allow-list of what may be shown, and Mask in place of everything else. A URL shows its
// scheme, its hosts and ports, a path of plain characters (a database, a Sentinel master, a
// base path), a user name beside a password, and the values of the query parameters known to
// be harmless; a password, a user name alone (a token, for many services), any other query
// parameter, a fragment, and any part that does not read as what it should be (a host list
// that is not one; a URL whose password holds a raw '/', '?' or '#') are masked. A
// setting shows its value only when its caller knows it holds no secret, and its URLs
// redacted as above. Nothing else is shown: a setting, a parameter or a part of a URL that nobody
// listed is masked.
package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// Mask stands for what is not shown.
const Mask = "xxxxx"

// shownParams are the query parameters whose values may be shown: the stores' own (store/redis
// NewFromURL: db, pool_size, dial_timeout, counters; username beside a password) and the
// common harmless ones of HTTP and OTLP endpoints.
var shownParams = map[string]bool{
	"db": true, "pool_size": true, "dial_timeout": true, "counters": true, "read_timeout": true, "write_timeout": true,
	"username": true, "protocol": true, "timeout": true, "sslmode": true, "tls": true,
}

// URL returns raw, a URL of a known scheme (isScheme; any other is masked whole) or a value
// where URLs are expected (a comma-separated list of URLs or
// of host:port, or a word such as "memory"), with only its allowed parts shown (see the
// package doc). The userinfo ends at the authority's last '@', so a password holding '@' or a
// space is masked whole; when an '@' comes after a '/', '?' or '#' (a password holding them
// raw, or a query holding an '@'), nothing after the scheme is shown.
func URL(raw string) string {
	if !strings.Contains(raw, "://") {
		if hostList(raw, false) {
			return raw
		}
		return Mask
	}
	if i := nextURL(raw); i >= 0 { // a list of URLs
		return URL(raw[:i]) + "," + URL(raw[i+1:])
	}
	if name, rest, ok := named(raw); ok { // name=URL, an element of a list such as --regions
		return name + "=" + URL(rest)
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	if !isScheme(scheme) {
		return Mask
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	end := strings.IndexAny(rest, "/?#") // where the authority ends, if nothing is raw
	at := strings.LastIndexByte(rest, '@')
	if end >= 0 && at > end {
		// An '@' past a '/', '?' or '#': a password holding them raw, or a query or path
		// holding an '@'; either way no part can be told safe.
		b.WriteString(Mask)
		return b.String()
	}
	if at >= 0 {
		b.WriteString(userinfo(rest[:at]))
		b.WriteByte('@')
		rest = rest[at+1:]
	}
	hosts, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		hosts, tail = rest[:i], rest[i:]
	}
	if !hostList(hosts, true) { // not the URL it should be: nothing after it can be told safe
		b.WriteString(Mask)
		return b.String()
	}
	b.WriteString(hosts)
	tail, frag, hasFrag := strings.Cut(tail, "#")
	path, query, hasQuery := strings.Cut(tail, "?")
	switch {
	case path == "":
	case path[0] == '/' && (len(path) == 1 || word(path[1:], "._~/:-")):
		b.WriteString(path)
	default:
		b.WriteString("/" + Mask)
	}
	if hasQuery {
		b.WriteByte('?')
		b.WriteString(params(query))
	}
	if hasFrag && frag != "" {
		b.WriteString("#" + Mask)
	} else if hasFrag {
		b.WriteByte('#')
	}
	return b.String()
}

// named splits "name=scheme://..." at its '=' when name is a plain word: the element of a list
// of named URLs (--regions eu=redis://...,us=redis://...).
func named(raw string) (name, rest string, ok bool) {
	scheme, _, _ := strings.Cut(raw, "://")
	name, scheme, found := strings.Cut(scheme, "=")
	if !found || !word(name, "._-") || !isScheme(scheme) {
		return "", "", false
	}
	return name, raw[len(name)+1:], true
}

// isScheme reports whether s is one of the schemes Sluice is given URLs of: the stores', the
// upstreams' and the collectors' (an allow-list too: "password=..." before a "://" is no
// scheme to show).
func isScheme(s string) bool { return schemes[strings.ToLower(s)] }

var schemes = map[string]bool{
	"memory": true, "redis": true, "rediss": true, "redis-sentinel": true, "redis-cluster": true, "memcached": true,
	"http": true, "https": true, "grpc": true, "grpcs": true, "dns": true, "unix": true, "tcp": true, "udp": true,
}

// nextURL returns the index of the first comma of raw followed by a scheme and "://" (or a
// name, '=' and those), where a second URL of a list starts, or -1.
func nextURL(raw string) int {
	for i := strings.IndexByte(raw, ','); i >= 0; {
		next := raw[i+1:]
		if _, rest, ok := named(next); ok {
			next = rest
		}
		if scheme, _, ok := strings.Cut(next, "://"); ok && isScheme(scheme) {
			return i
		}
		j := strings.IndexByte(raw[i+1:], ',')
		if j < 0 {
			return -1
		}
		i += 1 + j
	}
	return -1
}

// userinfo shows the user name beside a password (when it is a plain word), never the password,
// and masks a user name alone.
func userinfo(s string) string {
	user, _, hasPass := strings.Cut(s, ":")
	switch {
	case !hasPass:
		return Mask
	case user == "" || word(user, "._-"):
		return user + ":" + Mask
	}
	return Mask + ":" + Mask
}

// params shows the query parameters of shownParams with a plain value; every other one is
// masked, name and value.
func params(query string) string {
	ps := strings.Split(query, "&")
	for i, p := range ps {
		name, value, _ := strings.Cut(p, "=")
		switch {
		case p == "":
		case shownParams[strings.ToLower(name)] && (value == "" || word(value, "._:-")):
		default:
			ps[i] = Mask
		}
	}
	return strings.Join(ps, "&")
}

// hostList reports whether s is a comma-separated list of host[:port] (hosts of letters,
// digits, '.', '-' and '_', or bracketed IPv6 addresses), with a port of digits on each when
// ports is false and the list is not a single word (a bare word may be a password): what
// stores and proxies take for addresses. "memory" passes as the one word a store URL may be.
func hostList(s string, inURL bool) bool {
	if s == "memory" {
		return true
	}
	if s == "" {
		return inURL
	}
	for _, h := range strings.Split(s, ",") {
		host, port, hasPort := h, "", false
		if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
			host, port, hasPort = h[:i], h[i+1:], true
		}
		if hasPort {
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				return false
			}
		} else if !inURL {
			return false
		}
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			if !word(host[1:len(host)-1], ":.%") {
				return false
			}
		} else if host != "" && !word(host, ".-_") || host == "" && !hasPort {
			return false
		}
	}
	return true
}

// word reports whether s is not empty and holds only ASCII letters, digits and the bytes of
// extra.
func word(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// Setting returns the value of a setting (an environment variable, a flag) fit for a log line:
// URLs in it redacted as URL does; otherwise the value itself when shown says the caller knows
// the setting holds no secret (a number, an address, a path, the name of a mode); otherwise
// Mask. An empty value stays empty.
func Setting(value string, shown bool) string {
	switch {
	case value == "":
		return ""
	case strings.Contains(value, "://"):
		return URL(value)
	case shown:
		return value
	}
	return Mask
}

// ParseError is what url.Parse found wrong in a URL, without the URL and the parts of it the
// message quotes: a password holding a raw '/' makes the rest of the URL an "invalid port"
// that url.Parse quotes, and a password a "host name" with an invalid character.
func ParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if i := strings.IndexAny(msg, "\"'`"); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return msg
}

// HashPrefix starts a hashed request value.
const HashPrefix = "hash:"

// hashLen is the number of hexadecimal digits of a hashed value (48 bits).
const hashLen = 12

// hashKey keys the hashes; drawn once per process.
var hashKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}()

// Hash returns a request's value (an API key, a token, an address) as telemetry, logs, errors
// and answers may show it: HashPrefix and a keyed hash, the same for one value within the
// process (so an operator can follow a key from page to line) and useless to guess values
// from outside it.
func Hash(v string) string {
	m := hmac.New(sha256.New, hashKey)
	m.Write([]byte(v))
	var sum [sha256.Size]byte
	return HashPrefix + hex.EncodeToString(m.Sum(sum[:0]))[:hashLen]
}

// Scheme returns s, the part of a URL before "://" that is no known scheme, as an error may
// name it: as it is when it reads as a mistyped scheme (a letter, then at most 31 letters,
// digits, '+', '.' or '-'), else Mask.
func Scheme(s string) string {
	if len(s) <= 32 && word(s, "+.-") && 'a' <= s[0]|0x20 && s[0]|0x20 <= 'z' {
		return s
	}
	return Mask
}

package clientip

import (
	"net/netip"
	"strings"
)

// hops reads the entries of X-Forwarded-For or Forwarded header lines from the right: the last
// line's last entry first. It slices the header strings and never allocates.
type hops struct {
	lines     []string
	forwarded bool // RFC 7239 elements rather than X-Forwarded-For addresses
	line      int  // index of the line being read
	end       int  // lines[line][:end] is still unread; -1 once the line is used up
}

func (h *hops) start() {
	h.line = len(h.lines) - 1
	if h.line >= 0 {
		h.end = len(h.lines[h.line])
	}
}

// next returns the next address to the left. ok is false when there is none, or when the
// entry is malformed, too long, or names no usable address ("unknown", an obfuscated
// identifier): the walk must stop there.
func (h *hops) next() (netip.Addr, bool) {
	for h.line >= 0 && h.end < 0 {
		h.line--
		if h.line >= 0 {
			h.end = len(h.lines[h.line])
		}
	}
	if h.line < 0 {
		return netip.Addr{}, false
	}
	entry, ok := h.cut()
	if !ok {
		return netip.Addr{}, false
	}
	if h.forwarded {
		entry, ok = forwardedFor(entry)
		if !ok {
			return netip.Addr{}, false
		}
	}
	return parseNode(entry)
}

// cut returns the rightmost unread entry of the current line, trimmed of optional whitespace,
// and moves left past it and its comma. In a Forwarded line, commas inside quoted strings do
// not separate elements.
func (h *hops) cut() (string, bool) {
	s := h.lines[h.line][:h.end]
	quoted := false
	for i := len(s) - 1; i >= 0; i-- {
		if len(s)-1-i > maxEntryLen {
			return "", false
		}
		switch c := s[i]; {
		case c == '"' && h.forwarded:
			quoted = !quoted
		case c == ',' && !quoted:
			h.end = i
			return trimOWS(s[i+1:]), true
		}
	}
	h.end = -1
	if quoted || len(s) > maxEntryLen {
		return "", false
	}
	return trimOWS(s), true
}

// forwardedFor returns the value of the one "for" parameter of a Forwarded element, unquoted.
func forwardedFor(elem string) (string, bool) {
	var value string
	found := false
	for len(elem) > 0 {
		pair := elem
		if i := indexUnquoted(elem, ';'); i >= 0 {
			pair, elem = elem[:i], elem[i+1:]
		} else {
			elem = ""
		}
		name, v, ok := strings.Cut(trimOWS(pair), "=")
		if !ok {
			return "", false
		}
		if !strings.EqualFold(name, "for") {
			continue
		}
		if found {
			return "", false
		}
		found = true
		value = v
	}
	if !found {
		return "", false
	}
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		value = value[1 : len(value)-1]
		if strings.ContainsAny(value, "\"\\") {
			return "", false // quoted-pairs never appear in an address
		}
	}
	return value, true
}

func indexUnquoted(s string, sep byte) int {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case sep:
			if !quoted {
				return i
			}
		}
	}
	return -1
}

func trimOWS(s string) string { return strings.Trim(s, " \t") }

// parseNode parses an address with an optional port: "192.0.2.1", "192.0.2.1:80", "2001:db8::1",
// "[2001:db8::1]" or "[2001:db8::1]:80". It looks at the shape first, so well-formed input is
// parsed once and never allocates an error.
func parseNode(s string) (netip.Addr, bool) {
	host := s
	if len(s) > 0 && s[0] == '[' {
		i := strings.IndexByte(s, ']')
		if i < 0 || !validPort(s[i+1:], true) {
			return netip.Addr{}, false
		}
		host = s[1:i]
		if strings.IndexByte(host, ':') < 0 {
			return netip.Addr{}, false // brackets hold IPv6 only
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		if !validPort(s[i:], false) {
			return netip.Addr{}, false
		}
		host = s[:i]
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// validPort reports whether s is ":" followed by 1 to 5 digits (or empty, when optional).
func validPort(s string, optional bool) bool {
	if s == "" {
		return optional
	}
	if s[0] != ':' || len(s) < 2 || len(s) > 6 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicehq/sluice/rls"
)

// checkStrictJSON refuses what encoding/json lets through silently in a body that is valid
// JSON: a string (a value or a field name) that is not valid UTF-8, as raw bytes or as a lone
// \u surrogate (encoding/json turns both into U+FFFD, so different byte strings would share a
// counter), and a field given twice in one object (encoding/json keeps the last one; names are
// compared ignoring case, as encoding/json matches them). The error names the field by its
// path in the body, e.g. "rule.period" or "descriptors[0].entries[1].key". Call it on a body
// that decoded: on malformed JSON it stops and reports nothing.
func checkStrictJSON(body []byte) error {
	sc := strictScanner{b: body}
	return sc.value()
}

// strictScanner walks a JSON document, keeping the path to the current value.
type strictScanner struct {
	b    []byte
	i    int
	path []pathElem
}

// pathElem is one step of a path: a field name, or an array index when index >= 0.
type pathElem struct {
	name  string
	index int
}

func (sc *strictScanner) pathString() string {
	if len(sc.path) == 0 {
		return "body"
	}
	var b strings.Builder
	for _, e := range sc.path {
		switch {
		case e.index >= 0:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			if plainName(e.name) && len(e.name) <= 64 {
				b.WriteString(e.name)
			} else {
				b.WriteString(rls.Quote(e.name))
			}
		}
	}
	return b.String()
}

func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

func (sc *strictScanner) space() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

func (sc *strictScanner) value() error {
	sc.space()
	if sc.i >= len(sc.b) {
		return nil
	}
	switch sc.b[sc.i] {
	case '{':
		return sc.object()
	case '[':
		return sc.array()
	case '"':
		if !sc.str() {
			return invalid("%s: not valid UTF-8", sc.pathString())
		}
	default: // a number, true, false or null
		for sc.i < len(sc.b) && !strings.ContainsRune(",]} \t\n\r", rune(sc.b[sc.i])) {
			sc.i++
		}
	}
	return nil
}

func (sc *strictScanner) object() error {
	sc.i++ // {
	var seen map[string]bool
	for {
		sc.space()
		if sc.i >= len(sc.b) {
			return nil
		}
		switch sc.b[sc.i] {
		case '}':
			sc.i++
			return nil
		case ',':
			sc.i++
			continue
		case '"':
		default:
			return nil // not JSON: the decoder reports it
		}
		start := sc.i
		if !sc.str() {
			return invalid("%s: a field name is not valid UTF-8", sc.pathString())
		}
		var name string
		if err := json.Unmarshal(sc.b[start:sc.i], &name); err != nil {
			return nil // not JSON: the decoder reports it
		}
		sc.path = append(sc.path, pathElem{name: name, index: -1})
		folded := strings.ToLower(name)
		if seen[folded] {
			return invalid("%s: given twice (each field may appear once)", sc.pathString())
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		seen[folded] = true
		sc.space()
		if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
			return nil
		}
		sc.i++
		if err := sc.value(); err != nil {
			return err
		}
		sc.path = sc.path[:len(sc.path)-1]
	}
}

func (sc *strictScanner) array() error {
	sc.i++ // [
	for n := 0; ; {
		sc.space()
		if sc.i >= len(sc.b) {
			return nil
		}
		switch sc.b[sc.i] {
		case ']':
			sc.i++
			return nil
		case ',':
			sc.i++
			continue
		}
		sc.path = append(sc.path, pathElem{index: n})
		if err := sc.value(); err != nil {
			return err
		}
		sc.path = sc.path[:len(sc.path)-1]
		n++
	}
}

// str moves past the string starting at sc.i and reports whether it is valid UTF-8: no invalid
// byte sequence, and every \u surrogate escape part of a pair.
func (sc *strictScanner) str() bool {
	sc.i++ // opening quote
	valid := true
	for sc.i < len(sc.b) {
		c := sc.b[sc.i]
		switch {
		case c == '"':
			sc.i++
			return valid
		case c == '\\' && sc.i+1 < len(sc.b) && sc.b[sc.i+1] == 'u':
			r := sc.hex4(sc.i + 2)
			sc.i += 6
			if !utf16.IsSurrogate(r) {
				continue
			}
			if r < 0xdc00 && sc.i+1 < len(sc.b) && sc.b[sc.i] == '\\' && sc.b[sc.i+1] == 'u' {
				if lo := sc.hex4(sc.i + 2); lo >= 0xdc00 && lo < 0xe000 {
					sc.i += 6
					continue
				}
			}
			valid = false
		case c == '\\':
			sc.i += 2
		case c < utf8.RuneSelf:
			sc.i++
		default:
			r, size := utf8.DecodeRune(sc.b[sc.i:])
			if r == utf8.RuneError && size == 1 {
				valid = false
			}
			sc.i += size
		}
	}
	return valid
}

// hex4 decodes the four hex digits at i, or -1.
func (sc *strictScanner) hex4(i int) rune {
	if i+4 > len(sc.b) {
		return -1
	}
	v, err := strconv.ParseUint(string(sc.b[i:i+4]), 16, 16)
	if err != nil {
		return -1
	}
	return rune(v)
}

package replay

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonFormat reads JSON lines: one object a line, whose top-level keys named by the mapping
// are read (strings and numbers; null is not set) and every other value skipped.
type jsonFormat struct {
	keys map[string]field
}

// parse reads one line into rec.
func (j *jsonFormat) parse(line string, rec *Record, ts *timeCache) error {
	s := jsonScanner{s: line}
	s.space()
	if !s.eat('{') {
		return errors.New("not a JSON object")
	}
	s.space()
	if s.eat('}') {
		return s.end()
	}
	for {
		s.space()
		key, err := s.str()
		if err != nil {
			return err
		}
		s.space()
		if !s.eat(':') {
			return s.errorf("want : after a key")
		}
		s.space()
		f, wanted := j.keys[key]
		if wanted && f.kind != kindSkip {
			v, isNull, err := s.scalar()
			if err != nil {
				return fmt.Errorf("%q: %w", key, err)
			}
			if !isNull {
				if err := f.set(rec, v, ts); err != nil {
					return err
				}
			}
		} else if err := s.skip(0); err != nil {
			return err
		}
		s.space()
		if s.eat('}') {
			return s.end()
		}
		if !s.eat(',') {
			return s.errorf("want , or } after a value")
		}
	}
}

// jsonScanner reads a JSON text without allocating but for the strings with escapes.
type jsonScanner struct {
	s   string
	pos int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) space() {
	for s.pos < len(s.s) {
		switch s.s[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) eat(c byte) bool {
	if s.pos < len(s.s) && s.s[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// end checks that only white space follows the object.
func (s *jsonScanner) end() error {
	s.space()
	if s.pos != len(s.s) {
		return s.errorf("text after the object")
	}
	return nil
}

// str reads a string.
func (s *jsonScanner) str() (string, error) {
	if !s.eat('"') {
		return "", s.errorf("want a string")
	}
	start, escaped := s.pos, false
	for s.pos < len(s.s) {
		switch c := s.s[s.pos]; {
		case c == '"':
			v := s.s[start:s.pos]
			s.pos++
			if escaped {
				return unquoteJSON(v)
			}
			return v, nil
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < 0x20:
			return "", s.errorf("control character in a string")
		default:
			s.pos++
		}
	}
	return "", s.errorf("unterminated string")
}

// scalar reads a string or a number, as text; null reports isNull. A boolean, object or
// array is an error: no field of a request is one.
func (s *jsonScanner) scalar() (v string, isNull bool, err error) {
	if s.pos == len(s.s) {
		return "", false, s.errorf("want a value")
	}
	switch c := s.s[s.pos]; {
	case c == '"':
		v, err := s.str()
		return v, false, err
	case c == 'n':
		return "", true, s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.pos
		s.number()
		return s.s[start:s.pos], false, nil
	}
	return "", false, s.errorf("want a string or a number")
}

func (s *jsonScanner) literal(word string) error {
	if len(s.s)-s.pos < len(word) || s.s[s.pos:s.pos+len(word)] != word {
		return s.errorf("want %s", word)
	}
	s.pos += len(word)
	return nil
}

func (s *jsonScanner) number() {
	for s.pos < len(s.s) {
		switch c := s.s[s.pos]; {
		case c >= '0' && c <= '9', c == '-', c == '+', c == '.', c == 'e', c == 'E':
			s.pos++
		default:
			return
		}
	}
}

// maxDepth bounds the nesting of skipped values.
const maxDepth = 64

// skip passes over one value of any kind.
func (s *jsonScanner) skip(depth int) error {
	if depth > maxDepth {
		return s.errorf("nested more than %d deep", maxDepth)
	}
	if s.pos == len(s.s) {
		return s.errorf("want a value")
	}
	switch c := s.s[s.pos]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		s.number()
		return nil
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		s.pos++
		s.space()
		if s.eat(close) {
			return nil
		}
		for {
			s.space()
			if c == '{' {
				if _, err := s.str(); err != nil {
					return err
				}
				s.space()
				if !s.eat(':') {
					return s.errorf("want : after a key")
				}
				s.space()
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			s.space()
			if s.eat(close) {
				return nil
			}
			if !s.eat(',') {
				return s.errorf("want , or %c", close)
			}
		}
	}
	return s.errorf("unexpected %q", s.s[s.pos])
}

// unquoteJSON decodes the escapes of a JSON string's body.
func unquoteJSON(v string) (string, error) {
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		if i == len(v) {
			return "", errors.New("JSON: unterminated escape")
		}
		switch e := v[i]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n, err := unicodeEscape(v[i-1:])
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
			i += n - 2
		default:
			return "", fmt.Errorf("JSON: unknown escape \\%c", e)
		}
	}
	return string(b), nil
}

// unicodeEscape reads \uXXXX (and a following low surrogate) at the start of v, returning the
// rune and the bytes read.
func unicodeEscape(v string) (rune, int, error) {
	r, ok := hex4(v)
	if !ok {
		return 0, 0, errors.New(`JSON: bad \u escape`)
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex4(v[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, nil
			}
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}

func hex4(v string) (rune, bool) {
	if len(v) < 6 || v[0] != '\\' || v[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(v[2:6], 16, 32)
	return rune(n), err == nil
}

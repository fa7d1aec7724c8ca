package luagen

import (
	"fmt"
	"regexp"
	"strings"
)

// A snippet is Lua code written once and spliced into the scripts where a line calls it.
type snippet struct {
	params []string
	body   []string        // lines, unindented
	locals map[string]bool // the names the body declares local
}

// A library holds the snippets of the snippet files and each file's text outside them.
type library struct {
	snippets map[string]*snippet
	rest     map[string]string // by file name: the text outside the snippets and their doc comments
}

var (
	defineLine = regexp.MustCompile(`^--@define (\w+)\(([\w, ]*)\)$`)
	callLine   = regexp.MustCompile(`^(\s*)--@(\w+)\((.*)\)\s*$`)
	localNames = regexp.MustCompile(`\blocal\s+(?:function\s+)?(\w+(?:\s*,\s*\w+)*)`)
)

// maxDepth bounds how deep snippets call snippets (a cycle would never end).
const maxDepth = 8

// define adds the snippets of the file named file, whose text is text, to l, and records its
// text outside them.
func (l *library) define(file, text string) error {
	var rest []string
	var sn *snippet
	for i, line := range strings.Split(text, "\n") {
		m := defineLine.FindStringSubmatch(line)
		switch {
		case sn != nil && line == "--@end":
			sn = nil
		case sn != nil && m != nil:
			return fmt.Errorf("luagen: %s:%d: --@define within a snippet", file, i+1)
		case sn != nil:
			sn.body = append(sn.body, line)
			for _, names := range localNames.FindAllStringSubmatch(line, -1) {
				for _, name := range strings.Split(names[1], ",") {
					sn.locals[strings.TrimSpace(name)] = true
				}
			}
		case m != nil:
			if l.snippets[m[1]] != nil {
				return fmt.Errorf("luagen: %s:%d: snippet %s defined twice", file, i+1, m[1])
			}
			for len(rest) > 0 && strings.HasPrefix(rest[len(rest)-1], "--") {
				rest = rest[:len(rest)-1] // the snippet's doc comment
			}
			sn = &snippet{params: splitArgs(m[2]), locals: map[string]bool{}}
			l.snippets[m[1]] = sn
		default:
			rest = append(rest, line)
		}
	}
	if sn != nil {
		return fmt.Errorf("luagen: %s: a snippet lacks its --@end line", file)
	}
	l.rest[file] = strings.Join(rest, "\n")
	return nil
}

// splice returns text with every line that calls a snippet replaced by the snippet's body.
// It fails on a call of an unknown snippet, with the wrong number of arguments, with an
// argument that names one of the snippet's locals (which would shadow it), or nested too deep.
func (l *library) splice(text string) (string, error) {
	var b strings.Builder
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if err := l.spliceLine(&b, line, 0); err != nil {
			return "", fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	return b.String(), nil
}

func (l *library) spliceLine(b *strings.Builder, line string, depth int) error {
	m := callLine.FindStringSubmatch(line)
	if m == nil {
		b.WriteString(line)
		return nil
	}
	indent, name, args := m[1], m[2], splitArgs(m[3])
	sn := l.snippets[name]
	switch {
	case sn == nil:
		return fmt.Errorf("no snippet %s: %s", name, line)
	case len(args) != len(sn.params):
		return fmt.Errorf("snippet %s takes %d arguments, got %d: %s", name, len(sn.params), len(args), line)
	case namesLocal(args, sn.locals):
		return fmt.Errorf("an argument names a local of snippet %s: %s", name, line)
	case depth >= maxDepth:
		return fmt.Errorf("snippets nested more than %d deep: %s", maxDepth, line)
	}
	with := make(map[string]string, len(args))
	for i, p := range sn.params {
		with[p] = args[i]
		if compound(args[i]) {
			with[p] = "(" + args[i] + ")" // keeps its precedence within the snippet's expressions
		}
	}
	for i, body := range sn.body {
		if i > 0 {
			b.WriteByte('\n')
		}
		if body == "" {
			continue
		}
		if err := l.spliceLine(b, indent+substitute(body, with), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// splitArgs splits a list of Lua expressions at its commas outside brackets and string
// literals, and trims them.
func splitArgs(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	var args []string
	from := 0
	outside(list, func(i int) {
		if list[i] == ',' {
			args = append(args, strings.TrimSpace(list[from:i]))
			from = i + 1
		}
	})
	return append(args, strings.TrimSpace(list[from:]))
}

// compound says whether the Lua expression e has, outside brackets and string literals, an
// operator or a space (as around "and", "or", "not"): within another expression it needs
// parentheses.
func compound(e string) bool {
	found := false
	outside(e, func(i int) {
		found = found || strings.IndexByte(" +-*/%^<>=~", e[i]) >= 0 || strings.HasPrefix(e[i:], "..")
	})
	return found
}

// outside calls f with the index of each byte of s outside brackets and string literals.
func outside(s string, f func(i int)) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '\'', '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		default:
			if depth == 0 {
				f(i)
			}
		}
	}
}

// substitute replaces the names of line that are keys of with by their values, but not within
// a string literal nor after a '.' or ':' (a field or method).
func substitute(line string, with map[string]string) string {
	var b strings.Builder
	forNames(line, func(name string) {
		if v, ok := with[name]; ok {
			name = v
		}
		b.WriteString(name)
	}, func(text string) { b.WriteString(text) })
	return b.String()
}

// namesLocal says whether an argument names one of locals, which the snippet's body would
// shadow.
func namesLocal(args []string, locals map[string]bool) bool {
	found := false
	for _, a := range args {
		forNames(a, func(name string) { found = found || locals[name] }, func(string) {})
	}
	return found
}

// forNames calls name with each name of s (outside string literals, not a field after '.' or
// ':') and other with the text between them, in order.
func forNames(s string, name, other func(string)) {
	from := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			i++
		case nameByte(c) && (c < '0' || c > '9') && (i == 0 || !nameByte(s[i-1])):
			j := i + 1
			for j < len(s) && nameByte(s[j]) {
				j++
			}
			field := i > 0 && (s[i-1] == ':' || s[i-1] == '.' && (i == 1 || s[i-2] != '.'))
			if !field {
				other(s[from:i])
				name(s[i:j])
				from = j
			}
			i = j
		default:
			i++
		}
	}
	other(s[from:])
}

func nameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

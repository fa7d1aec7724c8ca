package redis

import (
	"regexp"
	"strings"
)

// A snippet is Lua code written once and spliced into the scripts' text where a line holds
// "--@name(arg, ...)" (see lua/persist.lua and lua/muldiv.lua): the script runs it inline,
// with no function defined per call, each parameter replaced by its argument's text.
type snippet struct {
	params []string
	body   []string        // lines, unindented
	locals map[string]bool // the names the body declares local
}

var (
	defineLine = regexp.MustCompile(`^--@define (\w+)\(([\w, ]*)\)$`)
	spliceLine = regexp.MustCompile(`^(\s*)--@(\w+)\((.*)\)\s*$`)
	localNames = regexp.MustCompile(`\blocal\s+(?:function\s+)?(\w+(?:\s*,\s*\w+)*)`)
)

// defineSnippets reads the snippets of files, each a "--@define name(params)" line, the body,
// then a "--@end" line; it adds them to snippets and returns the files' text outside them and
// the comments just above them.
func defineSnippets(snippets map[string]*snippet, files ...string) []string {
	rest := make([]string, len(files))
	for i, f := range files {
		var out []string
		var sn *snippet
		for _, line := range strings.Split(f, "\n") {
			switch m := defineLine.FindStringSubmatch(line); {
			case sn != nil && line == "--@end":
				sn = nil
			case sn != nil:
				sn.body = append(sn.body, line)
				for _, l := range localNames.FindAllStringSubmatch(line, -1) {
					for _, name := range strings.Split(l[1], ",") {
						sn.locals[strings.TrimSpace(name)] = true
					}
				}
			case m != nil:
				for len(out) > 0 && strings.HasPrefix(out[len(out)-1], "--") {
					out = out[:len(out)-1] // the snippet's doc comment
				}
				sn = &snippet{params: splitArgs(m[2]), locals: map[string]bool{}}
				snippets[m[1]] = sn
			default:
				out = append(out, line)
			}
		}
		rest[i] = strings.Join(out, "\n")
	}
	return rest
}

// splice returns src with every line calling a snippet replaced by the snippet's body, at the
// line's indentation, and the snippets that body calls spliced in turn. A line it cannot splice
// (an unknown snippet, the wrong number of arguments, an argument naming one of the snippet's
// locals, or too deep a nesting) stays as it is, a Lua comment (scripts_test.go checks that
// none is left).
func splice(src string, snippets map[string]*snippet) string {
	var b strings.Builder
	for i, line := range strings.Split(src, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		spliceInto(&b, line, snippets, 0)
	}
	return b.String()
}

func spliceInto(b *strings.Builder, line string, snippets map[string]*snippet, depth int) {
	m := spliceLine.FindStringSubmatch(line)
	if m == nil || depth > 8 {
		b.WriteString(line)
		return
	}
	sn, args := snippets[m[2]], splitArgs(m[3])
	if sn == nil || len(args) != len(sn.params) || namesLocal(args, sn.locals) {
		b.WriteString(line)
		return
	}
	with := make(map[string]string, len(args))
	for i, p := range sn.params {
		with[p] = args[i]
		if compound(args[i]) {
			with[p] = "(" + args[i] + ")" // keeps its precedence within the snippet's expressions
		}
	}
	for i, l := range sn.body {
		if i > 0 {
			b.WriteByte('\n')
		}
		if l == "" {
			continue
		}
		spliceInto(b, m[1]+substitute(l, with), snippets, depth+1)
	}
}

// splitArgs splits a list of Lua expressions at its commas outside brackets and string
// literals, and trims them.
func splitArgs(list string) []string {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	var args []string
	from := 0
	outside(list, func(i int) bool {
		if list[i] == ',' {
			args = append(args, strings.TrimSpace(list[from:i]))
			from = i + 1
		}
		return true
	})
	return append(args, strings.TrimSpace(list[from:]))
}

// compound says whether the Lua expression e has an operator outside brackets and string
// literals, so that it needs parentheses within another expression.
func compound(e string) bool {
	return !outside(e, func(i int) bool {
		switch c := e[i]; {
		case strings.IndexByte("+-*/%^<>=~", c) >= 0, c == '.' && strings.HasPrefix(e[i:], ".."):
			return false
		case nameByte(c) && (i == 0 || !nameByte(e[i-1])):
			j := i
			for j < len(e) && nameByte(e[j]) {
				j++
			}
			w := e[i:j]
			return w != "and" && w != "or" && w != "not"
		}
		return true
	})
}

// outside calls f with the index of each byte of s outside brackets and string literals, while
// f returns true, and says whether it always did.
func outside(s string, f func(i int) bool) bool {
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
			if depth == 0 && !f(i) {
				return false
			}
		}
	}
	return true
}

// substitute replaces the names of line that are keys of with by their values, but not within
// a string literal nor after a '.' or ':' (a field or method).
func substitute(line string, with map[string]string) string {
	var b strings.Builder
	forNames(line, func(start, end int) {
		if v, ok := with[line[start:end]]; ok {
			b.WriteString(v)
		} else {
			b.WriteString(line[start:end])
		}
	}, func(text string) { b.WriteString(text) })
	return b.String()
}

// namesLocal says whether an argument names one of locals, which the snippet's body would
// shadow.
func namesLocal(args []string, locals map[string]bool) bool {
	found := false
	for _, a := range args {
		forNames(a, func(start, end int) { found = found || locals[a[start:end]] }, func(string) {})
	}
	return found
}

// forNames calls name with the bounds of each name of s (outside string literals, not a field
// after '.' or ':') and other with the text between them.
func forNames(s string, name func(start, end int), other func(text string)) {
	from := 0
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' {
					i++
				}
				i++
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
				name(i, j)
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

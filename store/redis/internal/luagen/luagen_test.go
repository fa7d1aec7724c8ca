package luagen

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSnippetsWrittenOnce: each line of a snippet stands once in lua/, and what belongs to the
// snippets (the TTL's grace and slack, KEEPTTL, Dekker's split) only in the snippet files and
// in the prelude's constants.
func TestSnippetsWrittenOnce(t *testing.T) {
	const dir = "../../lua"
	files, err := filepath.Glob(dir + "/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	lines := map[string]int{}
	own := regexp.MustCompile(`\b(GRACE|SLACK|KEEPTTL|134217729)\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(code(string(b)), "\n") {
			code := strings.TrimSpace(line)
			if code == "" {
				continue
			}
			lines[code]++
			base := filepath.Base(f)
			if m := own.FindString(code); m != "" && !slices.Contains(snippetFiles, base) &&
				!(base == "prelude.lua" && strings.HasPrefix(code, "local "+m+" = ")) {
				t.Errorf("%s:%d: %s outside the snippets: %s", f, i+1, m, code)
			}
		}
	}
	lib, err := loadLibrary(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.snippets) < 3 {
		t.Fatalf("%d snippets", len(lib.snippets))
	}
	for name, sn := range lib.snippets {
		for _, line := range sn.body {
			if code := strings.TrimSpace(code(line)); len(code) > 8 && lines[code] != 1 {
				t.Errorf("snippet %s: %q stands %d times in lua/", name, code, lines[code])
			}
		}
	}
}

// code returns the Lua source src without its comments (none of the scripts' strings holds
// "--").
func code(src string) string {
	return regexp.MustCompile(`--.*`).ReplaceAllString(src, "")
}

func TestSplice(t *testing.T) {
	lib := &library{snippets: map[string]*snippet{}, rest: map[string]string{}}
	if err := lib.define("f.lua", `local x = 1
-- f's doc
--@define f(a, b)
local y = a .. 'a b' .. s.a .. x..a
do
  b = a
end
--@g(b)
--@end
--@define g(z)
z = z + 1
--@end`); err != nil {
		t.Fatal(err)
	}
	if rest := lib.rest["f.lua"]; rest != "local x = 1" {
		t.Errorf("text outside the snippets: %q", rest)
	}
	for _, c := range []struct{ src, want string }{
		{"  --@f(t[1], q) ", "  local y = t[1] .. 'a b' .. s.a .. x..t[1]\n  do\n    q = t[1]\n  end\n  q = q + 1"},
		{"--@f(g(1, ','), h[2])\nlast", "local y = g(1, ',') .. 'a b' .. s.a .. x..g(1, ',')\ndo\n  h[2] = g(1, ',')\nend\nh[2] = h[2] + 1\nlast"},
		{"--@f(u - v, w)", "local y = (u - v) .. 'a b' .. s.a .. x..(u - v)\ndo\n  w = (u - v)\nend\nw = w + 1"},
		{"--@f(not u, w)", "local y = (not u) .. 'a b' .. s.a .. x..(not u)\ndo\n  w = (not u)\nend\nw = w + 1"},
		{"-- --@f(a, b)", "-- --@f(a, b)"}, // not alone on its line: a comment
	} {
		if got, err := lib.splice(c.src); err != nil || got != c.want {
			t.Errorf("splice(%q) =\n%s, %v\nwant\n%s", c.src, got, err, c.want)
		}
	}
	for src, why := range map[string]string{
		"--@f(y, q)": "y is the snippet's local",
		"--@f(a)":    "too few arguments",
		"--@h(a)":    "no such snippet",
	} {
		if got, err := lib.splice(src); err == nil {
			t.Errorf("splice(%q) = %q, want an error (%s)", src, got, why)
		}
	}
	loop := &library{snippets: map[string]*snippet{}, rest: map[string]string{}}
	if err := loop.define("loop.lua", "--@define l()\n--@l()\n--@end"); err != nil {
		t.Fatal(err)
	}
	if _, err := loop.splice("--@l()"); err == nil {
		t.Error("a snippet calling itself: no error")
	}
	for e, want := range map[string]bool{"a": false, "t[i + 1]": false, "f(a, b - 1)": false, "'-'": false,
		"a.b:c(1)": false, "ab.. c": true, "-1": true, "a or b": true, "f(1)*2": true, "x ~= y": true} {
		if compound(e) != want {
			t.Errorf("compound(%q) = %v", e, !want)
		}
	}
	for list, want := range map[string][]string{
		"":                        nil,
		"a":                       {"a"},
		" a , b(c, d), '(,' ":     {"a", "b(c, d)", "'(,'"},
		"t[1], {1, 2}, \"\\\",\"": {"t[1]", "{1, 2}", "\"\\\",\""},
	} {
		if got := splitArgs(list); !reflect.DeepEqual(got, want) {
			t.Errorf("splitArgs(%q) = %q, want %q", list, got, want)
		}
	}
}

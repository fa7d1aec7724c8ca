package redis

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store/redis/internal/luagen"
)

// TestScriptsSpliced: no assembled script keeps a marker or a snippet call, every script that
// keeps a state in a string writes it through the persist snippet, and GCRA and the fixed
// window define no function (a closure per call), GCRA taking muldiv inline.
func TestScriptsSpliced(t *testing.T) {
	for _, sc := range Scripts() {
		srcs := map[string]string{sc.name: sc.src}
		if sc.multi != nil {
			srcs[sc.multi.name] = sc.multi.src
		}
		srcs[sc.budget.name] = sc.budget.src
		for name, src := range srcs {
			for i, line := range strings.Split(src, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "--@") {
					t.Errorf("%s:%d: left unspliced: %s", name, i+1, line)
				}
			}
			if keep := strings.Count(src, "'KEEPTTL')"); keep != 1 && sc.name != "sliding_log" {
				t.Errorf("%s: %d SET KEEPTTL, want the persist snippet's one", name, keep)
			}
		}
		switch sc.name {
		case "gcra", "fixed_window":
			if regexp.MustCompile(`\bfunction\b`).MatchString(code(sc.src)) {
				t.Errorf("%s defines a function", sc.name)
			}
		}
	}
	if !strings.Contains(gcraScript.src, "134217729 * remaining") {
		t.Error("gcra: muldiv is not spliced inline")
	}
}

// code returns the Lua source src without its comments (none of the scripts' strings holds
// "--").
func code(src string) string {
	return regexp.MustCompile(`--.*`).ReplaceAllString(src, "")
}

// TestScriptsGenerated: the scripts in lua/gen, which the store embeds, are what go generate
// writes from lua/*.lua today, byte for byte, and no other.
func TestScriptsGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := luagen.Write("lua", dir); err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Glob(filepath.Join(dir, "*.lua"))
	got, _ := filepath.Glob("lua/gen/*.lua")
	if len(want) == 0 || len(got) != len(want) {
		t.Errorf("lua/gen holds %d scripts, go generate writes %d: run go generate ./store/redis", len(got), len(want))
	}
	for _, f := range want {
		w, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if g, err := os.ReadFile(filepath.Join("lua/gen", filepath.Base(f))); err != nil || !bytes.Equal(g, w) {
			t.Errorf("lua/gen/%s is stale (%v): run go generate ./store/redis", filepath.Base(f), err)
		}
	}
	var embedded int
	for _, sc := range append(Scripts(), leaseAcquireScript, leaseRenewScript, leaseReleaseScript, leaseClearScript) {
		for _, v := range []*script{sc, sc.multi, sc.holdback, sc.budget} {
			if v == nil {
				continue
			}
			embedded++
			file := strings.ReplaceAll(v.name, "/", "_") + ".lua"
			if w, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(w) != v.src {
				t.Errorf("script %s: not the generated %s (%v)", v.name, file, err)
			}
		}
	}
	if embedded != len(want) {
		t.Errorf("the store runs %d scripts, go generate writes %d", embedded, len(want))
	}
}

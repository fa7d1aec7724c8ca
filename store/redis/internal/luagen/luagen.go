// Package luagen assembles the Lua scripts that the Redis store runs from their sources in
// store/redis/lua. `go generate ./store/redis` (store/redis/gen.go) writes them to
// store/redis/lua/gen, one file per script, which the store embeds; a test of the store fails
// when those files differ from what Generate returns, so the tree always holds, byte for byte,
// the text Redis executes.
//
// An algorithm's script is the prelude's constants (lua/prelude.lua, above its "--@single"
// line), the algorithm's helpers (its file above its "--@decide" line, if any, after the
// helper files it names), then a wrapper with its placeholder lines replaced: "--@single" by
// the prelude below that line (one decision's arguments) and "--@body" by the algorithm's
// body (its file below "--@decide"). The plain script's wrapper is those two placeholders, the
// batched variant's lua/multi.lua and the criticality variant's lua/reserve.lua.
//
// Then every line that calls a snippet, "--@name(arg, ...)" alone on its line, is replaced by
// the snippet's body at the line's indentation, each parameter replaced by its argument (in
// parentheses when the argument has an operator), and the snippets that body calls in turn.
// A snippet is defined in a helper file (lua/persist.lua, lua/muldiv.lua) between a line
// "--@define name(param, ...)" and a line "--@end"; its doc comment is the comment lines just
// above. So the scripts run shared code inline, with no function defined per call.
package luagen

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// An algorithm is the file of one algorithm's logic and what its scripts are built of.
type algorithm struct {
	name    string   // the scripts' file names start with it
	helpers []string // helper files whose text outside their snippets goes before the file's
	batched bool     // it has a batched variant (lua/multi.lua)
}

// algorithms are the store's algorithms (store/redis/scripts.go embeds their scripts).
var algorithms = []algorithm{
	{name: "fixed_window", batched: true},
	{name: "sliding_log"},
	{name: "sliding_window", helpers: []string{"muldiv.lua"}, batched: true},
	{name: "bucket", helpers: []string{"muldiv.lua"}, batched: true},
	{name: "gcra", batched: true},
}

// snippetFiles are the files defining the snippets.
var snippetFiles = []string{"muldiv.lua", "persist.lua"}

// Placeholder lines of the wrappers (lua/multi.lua, lua/reserve.lua) and the marks splitting
// lua/prelude.lua and an algorithm's file.
const (
	singleLine = "--@single"
	bodyLine   = "--@body"
	decideLine = "--@decide"
)

// Generate reads the sources from src (the store's lua directory) and returns the scripts
// the store runs, by file name: NAME.lua, NAME_multi.lua for a batched algorithm and
// NAME_reserve.lua, for each algorithm NAME.
func Generate(src fs.FS) (map[string]string, error) {
	read := func(name string) (string, error) {
		b, err := fs.ReadFile(src, name)
		return string(b), err
	}
	lib, err := loadLibrary(src)
	if err != nil {
		return nil, err
	}
	prelude, err := read("prelude.lua")
	if err != nil {
		return nil, err
	}
	consts, single, ok := cutLine(prelude, singleLine)
	if !ok {
		return nil, fmt.Errorf("luagen: prelude.lua: no %s line", singleLine)
	}
	wrappers := map[string]string{"": singleLine + "\n" + bodyLine}
	for suffix, f := range map[string]string{"_multi": "multi.lua", "_reserve": "reserve.lua"} {
		if wrappers[suffix], err = read(f); err != nil {
			return nil, err
		}
	}
	scripts := map[string]string{}
	for _, a := range algorithms {
		file, err := read(a.name + ".lua")
		if err != nil {
			return nil, err
		}
		for _, h := range slices.Backward(a.helpers) {
			file = lib.rest[h] + "\n" + file
		}
		helpers, body, ok := cutLine(file, decideLine)
		if !ok {
			helpers, body = "", file
		}
		for suffix, wrapper := range wrappers {
			if suffix == "_multi" && !a.batched {
				continue
			}
			name := a.name + suffix + ".lua"
			text := consts + "\n" + helpers + "\n" + fill(wrapper, map[string]string{singleLine: single, bodyLine: body})
			if scripts[name], err = lib.splice(text); err != nil {
				return nil, fmt.Errorf("luagen: %s: %w", name, err)
			}
		}
	}
	return scripts, nil
}

// Write generates the scripts from the sources in the directory src and writes them to the
// directory out, removing the .lua files there that it no longer generates.
func Write(src, out string) error {
	scripts, err := Generate(os.DirFS(src))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(out, "*.lua"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range old {
		if _, ok := scripts[filepath.Base(f)]; !ok {
			errs = append(errs, os.Remove(f))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(scripts)) {
		errs = append(errs, os.WriteFile(filepath.Join(out, name), []byte(scripts[name]), 0o644))
	}
	return errors.Join(errs...)
}

// loadLibrary reads the snippets of the snippet files of src.
func loadLibrary(src fs.FS) (*library, error) {
	lib := &library{snippets: map[string]*snippet{}, rest: map[string]string{}}
	for _, f := range snippetFiles {
		text, err := fs.ReadFile(src, f)
		if err != nil {
			return nil, err
		}
		if err := lib.define(f, string(text)); err != nil {
			return nil, err
		}
	}
	return lib, nil
}

// cutLine cuts text around its line mark: the text before the line, without the line's
// newline, and after it.
func cutLine(text, mark string) (before, after string, found bool) {
	return strings.Cut(text, "\n"+mark+"\n")
}

// fill returns wrapper with each line that is a key of parts replaced by its value.
func fill(wrapper string, parts map[string]string) string {
	lines := strings.Split(wrapper, "\n")
	for i, l := range lines {
		if p, ok := parts[l]; ok {
			lines[i] = p
		}
	}
	return strings.Join(lines, "\n")
}

package config_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/config"
)

// intField is an integer field of the rules' YAML: its path (lists as their item [0]) and
// the document that sets it to a value.
type intField struct {
	path string
	doc  func(value string) []byte
}

// intFields returns every integer field reachable from the rules' Document type, found by
// walking its Go types as the decoder does (each list's item once; nested descriptors to
// the depth given), so a field added later is covered too.
func intFields(t *testing.T) []intField {
	t.Helper()
	var out []intField
	var walk func(typ reflect.Type, path string, set func(any) any, depth int)
	walk = func(typ reflect.Type, path string, set func(any) any, depth int) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch typ.Kind() {
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || name == "" || name == "-" {
					continue
				}
				walk(f.Type, join(path, name), func(v any) any { return set(map[string]any{name: v}) }, depth)
			}
		case reflect.Slice:
			if typ.Elem().Kind() == reflect.Struct && typ.Elem().Name() == "Descriptor" && depth >= 2 {
				return
			}
			walk(typ.Elem(), path+"[0]", func(v any) any { return set([]any{v}) }, depth+1)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out = append(out, intField{path: path, doc: func(value string) []byte {
				n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: value}
				b, err := yaml.Marshal(set(n))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}})
		}
	}
	walk(reflect.TypeOf(config.Document{}), "", func(v any) any { return v }, 0)
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// TestFractionsNeverTruncated (issue 31 item 9): a fraction in any integer field of the rules
// is a problem naming the field's path and the value as written; yaml.v3 alone truncates it
// (max_in_flight: 2.9 admitted 2; requests_per_unit: 1.5 was accepted; 0.5 was reported as
// "got 0"). Property: for every integer field, for random fractions of either sign and any
// size, the problem is there and no problem reports the truncated value instead.
func TestFractionsNeverTruncated(t *testing.T) {
	fields := intFields(t)
	if len(fields) < 20 {
		t.Fatalf("found %d integer fields; the walk is broken", len(fields))
	}
	r := rand.New(rand.NewPCG(31, 9))
	values := []string{"0.5", "2.9", "1.5", "-0.5", "1e-3"}
	for range 5 {
		whole := r.Int64N(1 << uint(r.IntN(31)))
		values = append(values, strconv.FormatInt(whole, 10)+"."+strconv.Itoa(1+r.IntN(99)))
	}
	for _, f := range fields {
		for _, v := range values {
			err := decodeAndCompile(f.doc(v))
			var found bool
			for _, e := range unjoinAll(err) {
				var p *config.Problem
				if !errors.As(e, &p) || !strings.HasPrefix(p.Path, f.path) {
					continue
				}
				if strings.Contains(p.Reason, v) {
					found = true
				}
				for _, m := range gotValue.FindAllStringSubmatch(p.Reason, -1) {
					if m[1] != v {
						t.Errorf("%s: %s: reports another value (%s) than the one written: %v", f.path, v, m[1], p)
					}
				}
			}
			if !found {
				t.Errorf("%s: %s: no problem names the field and the value: %v", f.path, v, err)
			}
		}
	}
	t.Logf("%d integer fields x %d fractions: each refused, naming its path and the value", len(fields), len(values))
	// The bare form of max_in_flight is an integer too.
	for _, v := range values {
		err := decodeAndCompile([]byte("domain: d\ndescriptors:\n  - key: k\n    max_in_flight: " + v + "\n"))
		if err == nil || !strings.Contains(err.Error(), "descriptors[0].max_in_flight: ") || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Errorf("max_in_flight: %s: %v", v, err)
		}
	}
	// A float with no fractional part is the integer it equals.
	c, err := config.Compile(mustDecode(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2.0}\n    max_in_flight: 1e1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l := config.Lookup(c.Domain("d"), []entry{{"k", "v"}}); l == nil || l.Rules[0].Limit != 2 || l.InFlight.Limit != 10 {
		t.Errorf("2.0 and 1e1: %+v", l)
	}
}

// gotValue finds the values a problem reports ("got 2", "got \"0.5\"").
var gotValue = regexp.MustCompile(`got "?(-?[0-9][0-9.e+-]*)`)

func decodeAndCompile(data []byte) error {
	doc, err := config.Decode("rules.yaml", data)
	if err != nil {
		return err
	}
	_, err = config.Compile(doc)
	return err
}

func mustDecode(t *testing.T, rules string) *config.Document {
	t.Helper()
	doc, err := config.Decode("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// unjoinAll flattens joined errors.
func unjoinAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoinAll(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

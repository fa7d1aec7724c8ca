package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// shape collects the problems of a YAML tree's shape against the Go types it decodes into:
// unknown fields and values of the wrong kind, each with its line and YAML path, so that one
// run reports every one of them, named as validation names its problems.
type shape struct {
	file     string
	problems []*Problem
	broken   []string // paths of values that did not decode: validation is silent below them
	unknown  []string // paths of mappings with an unknown field: silent about them alone
}

// scalarForm marks a struct that may also be written as one scalar (max_in_flight: 10): its
// UnmarshalYAML judges the scalar.
type scalarForm interface{ scalarForm() }

var scalarFormType = reflect.TypeOf((*scalarForm)(nil)).Elem()

// maxShapeDepth bounds the walk (aliases may nest deeply; the decoder refuses worse).
const maxShapeDepth = 100

func (s *shape) add(line int, path, format string, args ...any) {
	s.problems = append(s.problems, &Problem{File: s.file, Line: line, Path: path, Reason: fmt.Sprintf(format, args...)})
}

func (s *shape) brokenAt(line int, path, format string, args ...any) {
	s.add(line, path, format, args...)
	s.broken = append(s.broken, path)
}

// shadows reports whether a problem at path only repeats one of the shape's: it lies under a
// value that did not decode, or is about a mapping with an unknown field (likely the field
// it misses, misspelled).
func (s *shape) shadows(path string) bool {
	for _, u := range s.unknown {
		if path == u {
			return true
		}
	}
	for _, b := range s.broken {
		if under(path, b) {
			return true
		}
	}
	return false
}

func field(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// check walks n, which decodes into a value of type t at path.
func (s *shape) check(n *yaml.Node, t reflect.Type, path string, depth int) {
	if depth > maxShapeDepth {
		return
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			s.check(n.Content[0], t, path, depth+1)
		}
		return
	case yaml.AliasNode:
		if n.Alias != nil {
			s.check(n.Alias, t, path, depth+1)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // the zero value
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(scalarFormType) {
		// A struct with a scalar form of its own (max_in_flight: 10): its decoder judges it.
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			reason := err.Error()
			if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
				reason = te.Errors[0]
			}
			s.brokenAt(n.Line, path, "%s", reason)
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		return
	case reflect.Struct:
		s.checkStruct(n, t, path, depth)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			s.brokenAt(n.Line, path, "want a list (- item), got %s", describe(n))
			return
		}
		for i, item := range n.Content {
			s.check(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", depth+1)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			s.brokenAt(n.Line, path, "want a mapping (key: value), got %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			s.check(n.Content[i+1], t.Elem(), field(path, n.Content[i].Value), depth+1)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			s.brokenAt(n.Line, path, "want %s, got %s", scalarWord(t), describe(n))
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			s.brokenAt(n.Line, path, "want %s, got %q", scalarWord(t), n.Value)
			return
		}
		if integer(t) && fraction(n) {
			s.brokenAt(n.Line, path, "want %s, got %s (a fraction is never rounded)", scalarWord(t), n.Value)
		}
	}
}

// integer reports whether t is an integer kind.
func integer(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// fraction reports whether the scalar n is a number with a fractional part (2.9, 0.5, 1.5e0).
// yaml.v3 decodes such a number into an integer field by truncating it (2.9 becomes 2), so
// every integer field is checked with it: a fraction is a problem, never silently rounded.
// A float with no fractional part (1.0, 1e3) is the integer it equals.
func fraction(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
		return false
	}
	var f float64
	if err := n.Decode(&f); err != nil {
		return false
	}
	return f != math.Trunc(f)
}

func (s *shape) checkStruct(n *yaml.Node, t reflect.Type, path string, depth int) {
	if n.Kind != yaml.MappingNode {
		s.brokenAt(n.Line, path, "want a mapping of fields (key: value), got %s", describe(n))
		return
	}
	fields := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := fields[k.Value]
		if !ok {
			known := make([]string, 0, len(fields))
			for name := range fields {
				known = append(known, name)
			}
			sort.Strings(known)
			s.add(k.Line, path, "unknown field %q (known: %s)", k.Value, strings.Join(known, ", "))
			s.unknown = append(s.unknown, path)
			continue
		}
		s.check(v, ft, field(path, k.Value), depth+1)
	}
}

// yamlFields maps the YAML names of t's fields to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func scalarWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

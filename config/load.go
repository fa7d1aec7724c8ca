package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds one rules file: 16 MiB.
const MaxFileSize = 16 << 20

// Decode decodes one rules file strictly: unknown fields and values of the wrong kind are all
// reported, each a *Problem naming the line and the YAML path. The document is not validated;
// see Document.Validate.
func Decode(name string, data []byte) (*Document, error) {
	doc, _, err := decode(name, data)
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// decode is Decode that also returns, with the problems of a file that parsed as YAML, the
// document as far as it decoded and its shape (to validate the rest and report every problem
// in one run).
func decode(name string, data []byte) (*Document, *shape, error) {
	if len(data) > MaxFileSize {
		return nil, nil, &Problem{File: name, Reason: fmt.Sprintf("%d bytes, more than the maximum of %d", len(data), MaxFileSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	err := dec.Decode(&root)
	if errors.Is(err, io.EOF) {
		return nil, nil, &Problem{File: name, Reason: "empty file (want a domain and descriptors)"}
	}
	if err != nil {
		return nil, nil, decodeError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, &Problem{File: name, Line: extra.Line, Reason: "more than one YAML document (want one domain per file)"}
	}
	sh := &shape{file: name}
	sh.check(&root, reflect.TypeOf(Document{}), "", 0)
	doc := &Document{}
	err = root.Decode(doc)
	doc.File = name
	if len(sh.problems) > 0 {
		errs := make([]error, len(sh.problems))
		for i, p := range sh.problems {
			errs[i] = p
		}
		if err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return nil, nil, decodeError(name, err)
			}
		}
		return doc, sh, errors.Join(errs...)
	}
	if err != nil { // what the shape check did not foresee
		return nil, nil, decodeError(name, err)
	}
	return doc, nil, nil
}

var linePrefix = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// decodeError turns yaml.v3 errors into Problems.
func decodeError(name string, err error) error {
	var msgs []string
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		p := &Problem{File: name, Reason: strings.TrimPrefix(m, "yaml: ")}
		if sm := linePrefix.FindStringSubmatch(m); sm != nil {
			p.Line, _ = strconv.Atoi(sm[1])
			p.Reason = m[len(sm[0]):]
		}
		errs = append(errs, p)
	}
	return errors.Join(errs...)
}

// Load reads the rules at p: one YAML file, or every *.yaml and *.yml file directly inside a
// directory (names starting with '.' skipped, so Kubernetes ConfigMap mounts work), and
// compiles them. Every problem of every file is reported.
func Load(p string) (*Config, error) { return LoadWith(p, Options{}) }

// LoadWith is Load with options: o.Tree reads a directory recursively, as
// envoyproxy/ratelimit reads its runtime directory.
func LoadWith(p string, o Options) (*Config, error) {
	files, err := ruleFiles(p, o)
	if err != nil {
		return nil, err
	}
	return compileFiles(files, os.ReadFile, o)
}

// LoadFS is Load on a file system, for example rules embedded with go:embed; p is a file or
// directory of fsys.
func LoadFS(fsys fs.FS, p string) (*Config, error) {
	st, err := fs.Stat(fsys, p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	files := []string{p}
	if st.IsDir() {
		entries, err := fs.ReadDir(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		files = files[:0]
		for _, e := range entries {
			if isRulesFile(e.Name()) && !e.IsDir() {
				files = append(files, path.Join(p, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%w: %s: no *.yaml or *.yml files", ErrInvalid, p)
		}
	}
	return compileFiles(files, func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) }, Options{})
}

func isRulesFile(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// ruleFiles lists the rules files at p, sorted.
func ruleFiles(p string, o Options) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	if o.Tree {
		return treeFiles(p, o.DotFiles)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !isRulesFile(e.Name()) {
			continue
		}
		full := filepath.Join(p, e.Name())
		if fi, err := os.Stat(full); err == nil && fi.IsDir() { // follows symlinks
			continue
		}
		files = append(files, full)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s: no *.yaml or *.yml files", ErrInvalid, p)
	}
	sort.Strings(files)
	return files, nil
}

// treeFiles lists every file below dir, recursively, sorted: symbolic links to files count,
// links to directories are not followed; names starting with '.' (files and directories)
// only with dotFiles.
func treeFiles(dir string, dotFiles bool) ([]string, error) {
	root, err := filepath.EvalSymlinks(dir) // the directory may be a link (the peer's "current")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && !dotFiles && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() { // a link to a directory
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.Join(dir, rel)) // named under dir, as given
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s: no rules files", ErrInvalid, dir)
	}
	sort.Strings(files)
	return files, nil
}

func compileFiles(files []string, read func(string) ([]byte, error), o Options) (*Config, error) {
	var docs []*Document
	var errs []error
	shapes := make(map[string]*shape)
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
			continue
		}
		doc, sh, err := decode(f, data)
		errs = append(errs, unjoin(err)...)
		if doc != nil {
			docs = append(docs, doc)
			shapes[f] = sh
		}
	}
	if len(errs) == 0 {
		return CompileWith(o, docs...)
	}
	// Validate what did decode, so one run reports every problem, leaving out what only
	// repeats a value that did not decode.
	if len(docs) > 0 {
		_, err := CompileWith(o, docs...)
		for _, e := range unjoin(err) {
			var p *Problem
			if errors.As(e, &p) && shapes[p.File] != nil && shapes[p.File].shadows(p.Path) {
				continue
			}
			errs = append(errs, e)
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return problemBefore(errs[i], errs[j]) })
	return nil, errors.Join(errs...)
}

// problemBefore orders problems by file and line; other errors come first.
func problemBefore(a, b error) bool {
	var pa, pb *Problem
	if !errors.As(a, &pa) {
		return errors.As(b, &pb)
	}
	if !errors.As(b, &pb) {
		return false
	}
	if pa.File != pb.File {
		return pa.File < pb.File
	}
	return pa.Line < pb.Line
}

// unjoin lists the errors joined in err.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

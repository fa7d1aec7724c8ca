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
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxFileSize bounds one rules file: 16 MiB.
const MaxFileSize = 16 << 20

// Decode decodes one rules file strictly: unknown fields and type errors are all reported,
// each as "name:line: message". The document is not validated; see Document.Validate.
func Decode(name string, data []byte) (*Document, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than the maximum of %d", ErrInvalid, name, len(data), MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	doc := &Document{}
	err := dec.Decode(doc)
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: empty file (want a domain and descriptors)", ErrInvalid, name)
	}
	if err != nil {
		return nil, decodeError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s:%d: more than one YAML document (want one domain per file)", ErrInvalid, name, extra.Line)
	}
	doc.File = name
	return doc, nil
}

var linePrefix = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// decodeError turns yaml.v3 errors into "name:line: message" problems wrapping ErrInvalid.
func decodeError(name string, err error) error {
	var msgs []string
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		if sm := linePrefix.FindStringSubmatch(m); sm != nil {
			errs = append(errs, fmt.Errorf("%w: %s:%s: %s", ErrInvalid, name, sm[1], m[len(sm[0]):]))
		} else {
			errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalid, name, strings.TrimPrefix(m, "yaml: ")))
		}
	}
	return errors.Join(errs...)
}

// Load reads the rules at p: one YAML file, or every *.yaml and *.yml file directly inside a
// directory (names starting with '.' skipped, so Kubernetes ConfigMap mounts work), and
// compiles them. Every problem of every file is reported.
func Load(p string) (*Config, error) {
	files, err := ruleFiles(p)
	if err != nil {
		return nil, err
	}
	return compileFiles(files, os.ReadFile)
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
	return compileFiles(files, func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) })
}

func isRulesFile(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// ruleFiles lists the rules files at p, sorted.
func ruleFiles(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
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

func compileFiles(files []string, read func(string) ([]byte, error)) (*Config, error) {
	var docs []*Document
	var errs []error
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
			continue
		}
		doc, err := Decode(f, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, doc)
	}
	if len(errs) > 0 {
		// Validate what did decode, so one run reports every problem.
		for _, d := range docs {
			if err := d.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
		return nil, errors.Join(errs...)
	}
	return Compile(docs...)
}

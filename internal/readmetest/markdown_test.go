package readmetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the checkout's directory.
const root = "../.."

// snippet is one fenced ```go block of a document.
type snippet struct {
	file string // relative to root
	line int    // of the block's first code line
	code string
}

func (s snippet) String() string { return s.file + ":" + strconv.Itoa(s.line) }

// documents returns README.md and docs/*.md, relative to root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return files
}

func read(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goSnippets returns the ```go blocks of file.
func goSnippets(t *testing.T, file string) []snippet {
	t.Helper()
	var out []snippet
	var cur *snippet
	var body []string
	for i, line := range strings.Split(read(t, file), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{file: file, line: i + 2}
			body = nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	if cur != nil {
		t.Fatalf("%s: unterminated ```go block", cur)
	}
	return out
}

// section returns the lines of file's "## title" section.
func section(t *testing.T, file, title string) []string {
	t.Helper()
	text := read(t, file)
	start := strings.Index(text, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("%s: no section %q", file, title)
	}
	text = text[start+len(title)+5:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	return strings.Split(text, "\n")
}

var linkRE = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// TestRelativeLinksExist: every relative link and image of README.md and docs/*.md names a
// file of the checkout (the live view's screenshot among them).
func TestRelativeLinksExist(t *testing.T) {
	for _, file := range documents(t) {
		for _, m := range linkRE.FindAllStringSubmatch(read(t, file), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(root, filepath.Dir(file), target)
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: %v", file, target, err)
			}
		}
	}
}

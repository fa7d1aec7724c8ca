package readmetest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// fragmentImports are the packages a fragment may name without importing them: the text
// around the README's fragments names them ("import ..." lines of earlier snippets, the
// package being described). A fragment's own import lines come first.
var fragmentImports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"fmt":          "fmt",
	"http":         "net/http",
	"log":          "log",
	"time":         "time",
	"sluice":       "github.com/sluicehq/sluice",
	"memory":       "github.com/sluicehq/sluice/store/memory",
	"redis":        "github.com/sluicehq/sluice/store/redis",
	"memcached":    "github.com/sluicehq/sluice/store/memcached",
	"store":        "github.com/sluicehq/sluice/store",
	"distributed":  "github.com/sluicehq/sluice/distributed",
	"httplimit":    "github.com/sluicehq/sluice/httplimit",
	"grpclimit":    "github.com/sluicehq/sluice/grpclimit",
	"connectlimit": "github.com/sluicehq/sluice/connectlimit",
	"connect":      "connectrpc.com/connect",
	"clientip":     "github.com/sluicehq/sluice/clientip",
	"quota":        "github.com/sluicehq/sluice/quota",
	"adaptive":     "github.com/sluicehq/sluice/adaptive",
	"goredis":      "github.com/redis/go-redis/v9",
	"grpc":         "google.golang.org/grpc",
	"insecure":     "google.golang.org/grpc/credentials/insecure",
}

// The context every fragment is compiled in: the variables the text before it has made.
const fragmentHead = `func snippet(ctx context.Context, limiter *sluice.Limiter, mux *http.ServeMux) error {
	_, _, _ = ctx, limiter, mux
	{
`

var (
	importLineRE = regexp.MustCompile(`^import\s+(?:(\w+)\s+)?("[^"]+")`)
	qualifiedRE  = regexp.MustCompile(`\b([a-z][a-zA-Z0-9]*)\.[A-Z]`)
	// errorRE is one line of the compiler's output: file:line:col: message.
	errorRE = regexp.MustCompile(`^\./(snippet\d+)/main\.go:(\d+):\d+: (.*)$`)
)

// wrap returns the Go file a snippet is compiled as, and the line of that file that holds
// the snippet's first line. A whole program (package main) is compiled as it is; a fragment
// inside a function of fragmentHead's context, with its own import lines hoisted and the
// packages of fragmentImports it names (an import left unused is not an error of the text).
func wrap(s snippet, pkg string) (src string, offset int) {
	if strings.HasPrefix(strings.TrimSpace(s.code), "package main") {
		return s.code, 1
	}
	imports := map[string]string{"context": "context", "sluice": "github.com/sluicehq/sluice", "http": "net/http"} // name -> path
	var body []string
	for _, line := range strings.Split(strings.TrimRight(s.code, "\n"), "\n") {
		if m := importLineRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			path, _ := strconv.Unquote(m[2])
			name := m[1]
			if name == "" {
				name = path[strings.LastIndex(path, "/")+1:]
			}
			imports[name] = path
			line = "" // keeps the line numbers
		}
		body = append(body, line)
	}
	code := strings.Join(body, "\n")
	for _, m := range qualifiedRE.FindAllStringSubmatch(code, -1) {
		if path, ok := fragmentImports[m[1]]; ok && imports[m[1]] == "" {
			imports[m[1]] = path
		}
	}
	names := make([]string, 0, len(imports))
	for name := range imports {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	for _, name := range names {
		fmt.Fprintf(&b, "import %s %q\n", name, imports[name])
	}
	b.WriteString("\n" + fragmentHead)
	offset = strings.Count(b.String(), "\n") + 1
	b.WriteString(code + "\n\t}\n\treturn nil\n}\n")
	return b.String(), offset
}

// ignored are the compiler's complaints that are not errors of a snippet: a fragment's
// variables that later text would use, and imports a fragment did not need.
var ignored = []string{"declared and not used", "imported and not used"}

// tempModule returns a module that requires the checkout (replace) with its dependencies'
// versions and sums, so that building in it needs nothing from the network once the
// checkout's own modules are downloaded.
func tempModule(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := read(t, "go.mod")
	requires := mod[strings.Index(mod, "\nrequire"):]
	gomod := "module readme.example\n\ngo 1.26.0\n\nrequire github.com/sluicehq/sluice v0.0.0\n\nreplace github.com/sluicehq/sluice => " + abs + "\n" + requires
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), []byte(read(t, "go.sum")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goCmd runs the go command in dir and returns its combined output.
func goCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// placed is a snippet written into the temporary module.
type placed struct {
	snippet
	dir    string // the package's directory in the module
	offset int    // line of main.go that holds the snippet's first line
}

// placeSnippets writes every ```go block of README.md and docs/*.md into its own package of
// a temporary module.
func placeSnippets(t *testing.T) (module string, all []placed) {
	t.Helper()
	module = tempModule(t)
	for _, file := range documents(t) {
		for _, s := range goSnippets(t, file) {
			name := fmt.Sprintf("snippet%02d", len(all)+1)
			src, offset := wrap(s, name)
			if err := os.MkdirAll(filepath.Join(module, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(module, name, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			all = append(all, placed{snippet: s, dir: name, offset: offset})
		}
	}
	return module, all
}

// TestSnippetsCompile: every ```go block of README.md and docs/*.md compiles in the context
// its text gives it; each error is reported at the document's line.
func TestSnippetsCompile(t *testing.T) {
	module, all := placeSnippets(t)
	if len(all) < 5 {
		t.Fatalf("found %d Go snippets; the extraction is broken", len(all))
	}
	out, err := goCmd(module, "build", "-gcflags=-e", "-o", os.DevNull, "./...")
	if err == nil {
		return
	}
	byDir := map[string]placed{}
	for _, p := range all {
		byDir[p.dir] = p
	}
	real := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# ") {
			continue
		}
		m := errorRE.FindStringSubmatch("./" + strings.TrimPrefix(line, "./"))
		if m == nil {
			t.Errorf("go build: %s", line)
			real++
			continue
		}
		if ignorable(m[3]) {
			continue
		}
		p := byDir[m[1]]
		n, _ := strconv.Atoi(m[2])
		t.Errorf("%s:%d: %s", p.file, p.line+n-p.offset, m[3])
		real++
	}
	if real == 0 && !strings.Contains(out, "declared and not used") && !strings.Contains(out, "imported and not used") {
		t.Errorf("go build failed: %v\n%s", err, out)
	}
}

func ignorable(msg string) bool {
	for _, s := range ignored {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

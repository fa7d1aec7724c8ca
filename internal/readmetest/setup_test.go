package readmetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The addresses the README's Set up section uses: the test serves on free ports instead and
// rewrites them.
const readmeHTTP = "localhost:8080"

var autolinkRE = regexp.MustCompile(`<http://` + readmeHTTP + `(/[^>]*)>`)

// TestReadmeSetUp follows the README's "Set up" section on a built sluice: the install
// path names the command, `go run ./cmd/sluice serve` is started (on free ports), every curl
// line is sent and its answer compared with the one shown under it (`# ...`; numbers of
// fields ending in _ms may differ), every page it links on the service answers 200, and
// every other command runs (exit 0) with the output shown under it.
func TestReadmeSetUp(t *testing.T) {
	lines := section(t, "README.md", "Set up")
	bin := buildSluice(t)
	var httpAddr string
	var commands int
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "    ") || strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
			continue
		}
		cmd := strings.TrimSpace(lines[i])
		if c, _, ok := strings.Cut(cmd, "  #"); ok { // a comment after the command
			cmd = strings.TrimSpace(c)
		}
		want, hasWant := "", false
		if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "# ") {
			want, hasWant = strings.TrimPrefix(strings.TrimSpace(lines[i+1]), "# "), true
		}
		commands++
		switch {
		case strings.HasPrefix(cmd, "go install "):
			pkg, _, _ := strings.Cut(strings.TrimPrefix(cmd, "go install "), "@")
			rel, ok := strings.CutPrefix(pkg, "github.com/sluicehq/sluice/")
			if _, err := os.Stat(filepath.Join(root, rel, "main.go")); !ok || err != nil {
				t.Errorf("README: %q installs %s, which is not a command of this module", cmd, pkg)
			}
		case cmd == "go run ./cmd/sluice serve":
			grpcAddr := testenv.FreeAddr(t)
			httpAddr = testenv.FreeAddr(t)
			var logs testenv.LogBuffer
			exited := start(t, root, &logs, bin, "serve", "--grpc-addr", grpcAddr, "--http-addr", httpAddr)
			defer func() {
				if t.Failed() {
					t.Logf("sluice serve's output:\n%s", logs.String())
				}
			}()
			waitHTTP(t, "http://"+httpAddr+"/healthz", exited)
		case strings.HasPrefix(cmd, "curl "):
			if httpAddr == "" {
				t.Fatalf("README: %q comes before the service is started", cmd)
			}
			got, err := curl(strings.ReplaceAll(cmd, readmeHTTP, httpAddr))
			if err != nil {
				t.Errorf("README: %s: %v", cmd, err)
				continue
			}
			if !hasWant {
				t.Errorf("README: %s shows no answer (a # line under it)", cmd)
			} else if !sameAnswer(got, want) {
				t.Errorf("README: %s\nanswered %s\nthe README shows %s", cmd, got, want)
			}
		case strings.HasPrefix(cmd, "go run ./cmd/sluice "):
			args := strings.Fields(strings.TrimPrefix(cmd, "go run ./cmd/sluice "))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			c := exec.CommandContext(ctx, bin, args...)
			c.Dir = root
			out, err := c.CombinedOutput()
			cancel()
			if err != nil {
				t.Errorf("README: %s: %v\n%s", cmd, err, out)
			} else if hasWant && !strings.Contains(string(out), want) {
				t.Errorf("README: %s printed\n%s\nnot %q", cmd, out, want)
			}
		default:
			t.Errorf("README: the Set up section shows %q, which this test cannot follow", cmd)
		}
	}
	if commands < 5 || httpAddr == "" {
		t.Fatalf("followed %d commands (service started: %v): the section's shape changed", commands, httpAddr != "")
	}
	for _, m := range autolinkRE.FindAllStringSubmatch(strings.Join(lines, "\n"), -1) {
		resp, err := http.Get("http://" + httpAddr + m[1])
		if err != nil {
			t.Errorf("README links %s: %v", m[0], err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("README links %s: %d %q", m[0], resp.StatusCode, body)
		}
	}
}

// curl sends the request of a curl command line (-s, -i, -X, -d, -H) and returns the body.
func curl(line string) (string, error) {
	args, err := shellWords(strings.TrimPrefix(line, "curl "))
	if err != nil {
		return "", err
	}
	method, url, body := "GET", "", ""
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-s" || a == "-i":
		case a == "-X":
			method = next()
		case strings.HasPrefix(a, "-X"):
			method = a[2:]
		case a == "-d":
			body = next()
			if method == "GET" {
				method = "POST"
			}
		case a == "-H":
			k, v, _ := strings.Cut(next(), ":")
			header.Add(k, strings.TrimSpace(v))
		case strings.HasPrefix(a, "-"):
			return "", fmt.Errorf("curl option %s: not followed by this test", a)
		default:
			url = a
		}
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header = header
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d sends
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// shellWords splits a command line as a POSIX shell does for the quoting the README uses:
// single and double quotes, no expansions.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case '\'', '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, errors.New("unterminated quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// sameAnswer compares an answer with the one the README shows: JSON values equal but for
// the numbers of fields ending in _ms (times, which vary), other text equal.
func sameAnswer(got, want string) bool {
	if !strings.HasPrefix(want, "{") {
		return got == want
	}
	var g, w any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(dropTimes(g), dropTimes(w))
}

func dropTimes(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.HasSuffix(k, "_ms") {
				if _, isNum := x.(float64); isNum {
					v[k] = "time"
					continue
				}
			}
			v[k] = dropTimes(x)
		}
	case []any:
		for i := range v {
			v[i] = dropTimes(v[i])
		}
	}
	return v
}

package readmetest

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	listenRE  = regexp.MustCompile(`http\.ListenAndServe\("([^"]+)"`)
	inlineRE  = regexp.MustCompile("`curl -i (localhost:\\d+)(/[^`\\s]*)`")
	portOfRE  = regexp.MustCompile(`:(\d+)$`)
	rateLimit = []string{"RateLimit", "RateLimit-Policy"}
)

// waitHTTP polls url until it answers (bounded: a loaded machine may be slow to start).
func waitHTTP(t *testing.T, url string, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("%s: the program exited before answering: %v", url, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer within 60s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildSluice builds ./cmd/sluice of the checkout into the test's temporary directory.
func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

// start runs bin with args until the test ends; its output goes to out.
func start(t *testing.T, dir string, out io.Writer, bin string, args ...string) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return exited
}

// TestSnippetServersAnswer: each whole program of the documents that serves HTTP is built
// and started on a free port (its address in the text replaced), and the curl line the text
// gives for it (`curl -i localhost:PORT/PATH`) answers 200 with the rate-limit headers;
// calling again soon meets a 429 (the text's limit is a few a second).
func TestSnippetServersAnswer(t *testing.T) {
	module, all := placeSnippets(t)
	found := 0
	for _, p := range all {
		m := listenRE.FindStringSubmatch(p.code)
		if m == nil || !strings.HasPrefix(strings.TrimSpace(p.code), "package main") {
			continue
		}
		port := portOfRE.FindStringSubmatch(m[1])
		var path string
		for _, c := range inlineRE.FindAllStringSubmatch(read(t, p.file), -1) {
			if port != nil && strings.HasSuffix(c[1], ":"+port[1]) {
				path = c[2]
			}
		}
		if path == "" {
			t.Errorf("%s serves on %s, but its text gives no `curl -i localhost:%s/...` line", p, m[1], port[1])
			continue
		}
		found++
		t.Run(p.String(), func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			src := strings.Replace(p.code, `"`+m[1]+`"`, `"`+addr+`"`, 1)
			if err := os.WriteFile(filepath.Join(module, p.dir, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(t.TempDir(), "program")
			if out, err := goCmd(module, "build", "-o", bin, "./"+p.dir); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			var logs testenv.LogBuffer
			exited := start(t, module, &logs, bin)
			defer func() {
				if t.Failed() {
					t.Logf("the program's output:\n%s", logs.String())
				}
			}()
			url := "http://" + addr + path
			waitHTTP(t, url, exited)
			denied := false
			for i := 0; i < 50 && !denied; i++ {
				resp, err := http.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					for _, h := range rateLimit {
						if resp.Header.Get(h) == "" {
							t.Errorf("GET %s: no %s header", path, h)
						}
					}
				case http.StatusTooManyRequests:
					denied = true
				default:
					t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
				}
			}
			if !denied {
				t.Errorf("GET %s: 50 calls in a row, none denied", path)
			}
		})
	}
	if found == 0 {
		t.Fatal("no program of the documents serves HTTP; the README's httplimit example is one")
	}
}

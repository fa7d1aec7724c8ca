package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCheckConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"check-config", "../../examples/config"}, &out, &errOut); code != 0 {
		t.Fatalf("example rules: exit %d: %s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"check-config", "../../config/testdata/many_problems.yaml"}, &out, &errOut); code != 1 {
		t.Fatalf("invalid rules: exit %d", code)
	}
	if n := strings.Count(errOut.String(), "many_problems.yaml:"); n != 3 {
		t.Errorf("want 3 problems, got %d: %s", n, errOut.String())
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--log-format", "xml"},
		{"serve", "--store", "nosuch://x", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"serve", "--mode", "psychic", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
		{"serve", "--config", "/nonexistent/rules.yaml", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

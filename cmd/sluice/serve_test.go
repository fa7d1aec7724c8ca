package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
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

// TestServeValidatesStoreFlags: a bad --mode, --fallback or --store-timeout (flag or
// environment) is a usage error that names the flag, before anything listens.
func TestServeValidatesStoreFlags(t *testing.T) {
	files := testenv.NewTLSFiles(t)
	for _, tc := range []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{args: []string{"--mode", "psychic"}, flag: "--mode"},
		{args: []string{"--mode", "SYNC"}, flag: "--mode"},
		{args: []string{"--fallback", "pray"}, flag: "--fallback"},
		{args: []string{"--fallback", "open"}, flag: "--fallback"},
		{args: []string{"--store-timeout", "-1s"}, flag: "--store-timeout"},
		{env: map[string]string{"SLUICE_MODE": "eventually"}, flag: "--mode"},
		{env: map[string]string{"SLUICE_FALLBACK": "maybe"}, flag: "--fallback"},
		{args: []string{"--request-rules", "some"}, flag: "--request-rules"},
		{args: []string{"--max-request-log-limit", "0"}, flag: "--max-request-log-limit"},
		{args: []string{"--max-request-log-limit", "1000001"}, flag: "--max-request-log-limit"},
		{args: []string{"--max-request-period", "0s"}, flag: "--max-request-period"},
		{args: []string{"--max-request-state-bytes", "-1"}, flag: "--max-request-state-bytes"},
		{env: map[string]string{"SLUICE_REQUEST_RULES": "all"}, flag: "--request-rules"},
		{env: map[string]string{"SLUICE_MAX_REQUEST_LOG_LIMIT": "lots"}, flag: "--max-request-log-limit"},
		{env: map[string]string{"SLUICE_MAX_REQUEST_PERIOD": "forever"}, flag: "--max-request-period"},
		{args: []string{"--memory-max-bytes", "0"}, flag: "--memory-max-bytes"},
		{env: map[string]string{"SLUICE_MEMORY_MAX_BYTES": "lots"}, flag: "--memory-max-bytes"},
		{args: []string{"--http-read-header-timeout", "0s"}, flag: "--http-read-header-timeout"},
		{args: []string{"--http-idle-timeout", "-1s"}, flag: "--http-idle-timeout"},
		{args: []string{"--http-max-header-bytes", "10"}, flag: "--http-max-header-bytes"},
		{args: []string{"--http-max-conns", "0"}, flag: "--http-max-conns"},
		{env: map[string]string{"SLUICE_HTTP_MAX_CONNS": "many"}, flag: "--http-max-conns"},
		// store TLS (storetls.go) and tracing (tracing.go)
		{args: []string{"--store-tls-ca", files.CA + ".missing"}, flag: "--store-tls-ca"},
		{args: []string{"--store-tls-cert", files.ClientCert}, flag: "--store-tls-cert, --store-tls-key"},
		{args: []string{"--store-tls-cert", files.ClientCert, "--store-tls-key", files.ServerKey}, flag: "--store-tls-cert, --store-tls-key"},
		{env: map[string]string{"SLUICE_STORE_TLS": "sure"}, flag: "--store-tls"},
		{env: map[string]string{"SLUICE_STORE_TLS_SKIP_HOSTNAME_VERIFICATION": "perhaps"}, flag: "--store-tls-skip-hostname-verification"},
		{args: []string{"--tracing", "--tracing-sampling-rate", "2"}, flag: "--tracing-sampling-rate"},
		{args: []string{"--tracing", "--tracing-exporter-protocol", "udp"}, flag: "--tracing-exporter-protocol"},
		{env: map[string]string{"SLUICE_TRACING": "yes please"}, flag: "--tracing"},
		{env: map[string]string{"SLUICE_TRACING": "true", "SLUICE_TRACING_SAMPLING_RATE": "half"}, flag: "--tracing-sampling-rate"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		var out, errOut bytes.Buffer
		args := append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, tc.args...)
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v %v: exit %d, want 2 (%s)", tc.args, tc.env, code, errOut.String())
		}
		if msg := errOut.String(); !strings.Contains(msg, tc.flag+":") {
			t.Errorf("%v %v: %q does not name %s", tc.args, tc.env, msg, tc.flag)
		}
		for k := range tc.env {
			os.Unsetenv(k) // t.Setenv restores it after the test

		}
	}
}

func TestServePprofLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0", "nohost"} {
		var out, errOut bytes.Buffer
		args := []string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--pprof", addr}
		if code := run(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--pprof") {
			t.Errorf("--pprof %s: exit %d, %q", addr, code, errOut.String())
		}
	}
}

package server_test

import (
	"strings"
	"testing"
)

func TestReload(t *testing.T) {
	dir := t.TempDir()
	rules := func(limit string) string {
		return "domain: r\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + limit + "}\n"
	}
	path := writeFile(t, dir, "rules.yaml", rules("1"))
	h := start(t, "", func(c *serverConfig) { c.RulesPath = dir })
	ask := func() string { return summary(h.ask(t, "r", desc("k", "v"))) }
	if got := ask(); got != "OK: OK 0/1 per minute reset 2m0s" {
		t.Fatalf("initial: %s", got)
	}
	if got := ask(); !strings.HasPrefix(got, "OVER_LIMIT") {
		t.Fatalf("initial limit: %s", got)
	}

	// A valid change applies without a restart, keeping the consumed state.
	writeFile(t, dir, "rules.yaml", rules("3"))
	if changed, err := h.srv.Reload(); !changed || err != nil {
		t.Fatalf("valid reload: %v %v", changed, err)
	}
	if got := ask(); got != "OK: OK 1/3 per minute reset 2m0s" {
		t.Errorf("after reload: %s", got)
	}

	// An invalid change is rejected and the old rules keep serving.
	writeFile(t, dir, "rules.yaml", rules("-1"))
	if changed, err := h.srv.Reload(); changed || err == nil || !strings.Contains(err.Error(), "requests_per_unit") {
		t.Fatalf("invalid reload: %v %v", changed, err)
	}
	if got := ask(); got != "OK: OK 0/3 per minute reset 2m0s" {
		t.Errorf("after rejected reload: %s", got)
	}
	if line := h.metric(t, `sluice_config_reloads_total{result="failure"}`); !strings.HasSuffix(line, " 1") {
		t.Errorf("failure metric: %q", line)
	}
	if line := h.metric(t, `sluice_config_reloads_total{result="success"}`); !strings.HasSuffix(line, " 1") {
		t.Errorf("success metric: %q", line)
	}

	// A new domain in a new file.
	writeFile(t, dir, "rules.yaml", rules("3"))
	writeFile(t, dir, "more.yaml", "domain: more\ndescriptors:\n  - key: a\n    rate_limit: {period: 10s, requests_per_unit: 1}\n")
	if changed, err := h.srv.Reload(); !changed || err != nil {
		t.Fatalf("new file: %v %v", changed, err)
	}
	if got := summary(h.ask(t, "more", desc("a", "1"))); got != "OK: OK 0/1 per 10xsecond reset 20s" {
		t.Errorf("new domain: %s", got)
	}
	_ = path
}

package server_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

// TestUnknownDomainLoggedOnce: a request for a domain no rules define is answered OK with no
// limit, as envoyproxy/ratelimit does, counted every time and logged once per domain, without
// a store call.
func TestUnknownDomainLoggedOnce(t *testing.T) {
	var logs testenv.LogBuffer
	h := start(t, goldenRules, func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	for _, domain := range []string{"nope", "nope", "other", "nope"} {
		if got := summary(h.ask(t, domain, desc("remote_address", "x"), desc("path", "/login"))); got != "OK: OK; OK" {
			t.Errorf("%s: %s", domain, got)
		}
	}
	recs := logs.Records(t, "request for a domain no rules define")
	var domains []string
	for _, r := range recs {
		domains = append(domains, r["domain"].(string))
	}
	if got := strings.Join(domains, ","); got != `"nope","other"` {
		t.Errorf("logged domains %s, want each once", got)
	}
	if v := h.metricValue(t, "sluice_unknown_domain_requests_total"); v != 4 {
		t.Errorf("sluice_unknown_domain_requests_total %v, want 4", v)
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls", n)
	}
}

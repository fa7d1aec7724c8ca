package server_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/server"
)

const classRules = `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 10, criticality: {sheddable: 0.3}}
`

// A limit with criticality shares admits each class only while its share holds, on one
// counter: the class travels in a descriptor of its own entry; an unknown class is CRITICAL,
// counted and logged once.
func TestCriticalityClassesShareOneCounter(t *testing.T) {
	var logs testenv.LogBuffer
	h := start(t, classRules, func(c *server.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	ask := func(class string) string {
		r := h.ask(t, "api", desc("tenant", "acme"), desc("criticality", class))
		return r.Statuses[0].Code.String()
	}
	var got []string
	for _, class := range []string{"SHEDDABLE", "SHEDDABLE", "SHEDDABLE", "SHEDDABLE", // 3 = 30%
		"SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", "SHEDDABLE_PLUS", // up to 7
		"urgent", "critical", "CRITICAL", // up to 9, the unknown one as CRITICAL
		"CRITICAL_PLUS", "CRITICAL_PLUS"} { // the last unit
		got = append(got, ask(class))
	}
	want := "[OK OK OK OVER_LIMIT OK OK OK OK OVER_LIMIT OK OK OVER_LIMIT OK OVER_LIMIT]"
	if fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %s", got, want)
	}
	if m := h.metric(t, "sluice_criticality_unknown_total"); m != "sluice_criticality_unknown_total 1" {
		t.Errorf("unknown classes counted: %q", m)
	}
	ask("urgent")
	if n := len(logs.Records(t, "unknown criticality")); n != 1 {
		t.Errorf("%d log lines for unknown classes, want 1", n)
	}
	// The key form: a supplied rule with a class gets the default shares.
	for i, want := range []string{`"allowed":true`, `"allowed":false`} {
		_, body := h.post(t, "/v1/allow", `{"key":"k","rule":{"limit":2,"period":"1m"},"criticality":"SHEDDABLE"}`)
		if !strings.Contains(body, want) {
			t.Errorf("key form, SHEDDABLE request %d on a limit of 2: %s, want %s", i, body, want)
		}
	}
}

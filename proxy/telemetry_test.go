package proxy_test

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// telemetryPages returns the admin pages that show keys: /metrics, /v1/top and /ui.
func telemetryPages(t *testing.T, p *running) map[string]string {
	t.Helper()
	pages := map[string]string{}
	for _, path := range []string{"/metrics", "/v1/top", "/ui"} {
		_, pages[path] = get(t, p.admin+path)
	}
	return pages
}

func exampleRules(t *testing.T) string {
	t.Helper()
	rules, err := os.ReadFile("../examples/proxy/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(rules)
}

// TestAPIKeyNotInTelemetry is the case: with the example rules, a request's
// X-Api-Key appears in none of the telemetry pages, while its (hashed) key does.
func TestAPIKeyNotInTelemetry(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, exampleRules(t))
	countPassed(t, p.base+"/api/items", 3, "X-Api-Key: sk-live-secret")
	for path, body := range telemetryPages(t, p) {
		if strings.Contains(body, "sk-live") {
			t.Errorf("%s shows the API key:\n%s", path, body)
		}
		if !strings.Contains(body, "api_key=hash:") {
			t.Errorf("%s lacks the hashed key", path)
		}
	}
}

// TestHeaderValuesNeverInTelemetry: for random header values, none appears in any telemetry
// page.
func TestHeaderValuesNeverInTelemetry(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, up, exampleRules(t))
	r := rand.New(rand.NewPCG(23, 5))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=:"
	var values []string
	for range 40 {
		v := make([]byte, 8+r.IntN(40))
		for i := range v {
			v[i] = alphabet[r.IntN(len(alphabet))]
		}
		values = append(values, string(v))
		countPassed(t, p.base+"/api/items", 1+r.IntN(3), "X-Api-Key: "+string(v))
	}
	for path, body := range telemetryPages(t, p) {
		for _, v := range values {
			if strings.Contains(body, v) {
				t.Errorf("%s shows the header value %q", path, v)
			}
		}
	}
}

// TestTelemetryRawOptIn: a descriptor with telemetry: raw shows its values as sent.
func TestTelemetryRawOptIn(t *testing.T) {
	up := newUpstream(t)
	rules := strings.Replace(exampleRules(t), "  - key: api_key\n", "  - key: api_key\n    telemetry: raw\n", 1)
	p := startProxy(t, up, rules)
	countPassed(t, p.base+"/api/items", 2, "X-Api-Key: tenant-42")
	for path, body := range telemetryPages(t, p) {
		if !strings.Contains(body, "api_key=tenant-42") {
			t.Errorf("%s lacks the raw key api_key=tenant-42", path)
		}
	}
}

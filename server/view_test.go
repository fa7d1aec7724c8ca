package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rls"
)

// viewRules show their values raw (telemetry: raw), so that the view's escaping is tested.
const viewRules = `
domain: web
descriptors:
  - key: user
    telemetry: raw
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: product
    telemetry: raw
    hot: {top_k: 10, cold_limit: 1}
    rate_limit: {unit: minute, requests_per_unit: 3}
`

const evilKey = `<script>alert(1)</script>`

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// GET /v1/top lists the keys being denied with their rates and the hot parameter's sketch;
// the gauges and /ui show them too, the page with every key escaped.
func TestLiveViewShowsDeniedKeysEscaped(t *testing.T) {
	h := start(t, viewRules)
	for range 5 {
		h.ask(t, "web", desc("user", evilKey))
		h.ask(t, "web", desc("product", "p1"))
	}
	h.ask(t, "web", desc("user", "bob"))
	var top rls.TopResponse
	if err := json.Unmarshal([]byte(get(t, h.base+"/v1/top")), &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Domains) != 1 || len(top.Domains[0].Limits) != 2 {
		t.Fatalf("top: %+v", top)
	}
	user, product := top.Domains[0].Limits[0], top.Domains[0].Limits[1]
	if user.Name != "web.user" {
		user, product = product, user
	}
	if len(user.Keys) != 2 || user.Keys[0].Key != "web|user="+evilKey || user.Keys[0].DeniedRate <= 0 ||
		user.Keys[0].AdmittedRate <= 0 || user.Keys[1].DeniedRate != 0 {
		t.Errorf("user keys: %+v", user.Keys)
	}
	// 5 requests of one value: 1 cold, 2 admitted by the store (charged the cold one), 2 denied.
	if product.Hot == nil || product.Hot.ColdAdmits != 1 || product.Hot.StoreCalls != 4 ||
		len(product.Hot.Values) != 1 || product.Hot.Values[0].Value != "web|product=p1" || product.Hot.Values[0].DeniedRate <= 0 {
		t.Errorf("product sketch: %+v", product.Hot)
	}
	if top.Store.URL != "custom" || top.Store.Circuit != "store" {
		t.Errorf("store: %+v", top.Store)
	}
	if m := h.metric(t, `sluice_top_key_rate{domain="web",key="web|user=<script>alert(1)</script>",limit="web.user",rank="1",result="denied"}`); m == "" {
		t.Errorf("no denied gauge for the top key:\n%s", h.metrics(t))
	}
	page := get(t, h.base+"/ui")
	if strings.Contains(page, evilKey) || !strings.Contains(page, "web|user=&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the page does not show the key escaped:\n%s", page)
	}
	if code, _ := getCode(h.base + "/v1/top?n=0"); code != http.StatusBadRequest {
		t.Errorf("n=0: %d, want 400", code)
	}
}

func getCode(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLiveViewHashesValues: by default, a request's descriptor values never appear in the
// live view, the gauges or /ui: each is a keyed hash, the same for one value across pages;
// values the rules name exactly are shown.
func TestLiveViewHashesValues(t *testing.T) {
	h := start(t, `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 2}
`)
	for range 3 {
		h.ask(t, "web", desc("user", "sk-live-secret"))
		h.ask(t, "web", desc("route", "/login", "user", "sk-live-other"))
	}
	top, metrics, page := get(t, h.base+"/v1/top"), h.metrics(t), get(t, h.base+"/ui")
	for name, body := range map[string]string{"/v1/top": top, "/metrics": metrics, "/ui": page} {
		if strings.Contains(body, "sk-live") {
			t.Errorf("%s shows a raw value:\n%s", name, body)
		}
	}
	var view rls.TopResponse
	if err := json.Unmarshal([]byte(top), &view); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, l := range view.Domains[0].Limits {
		for _, k := range l.Keys {
			keys[k.Key] = true
			if !strings.Contains(metrics, `key="`+k.Key+`"`) || !strings.Contains(page, k.Key) {
				t.Errorf("key %q of /v1/top is not the one of /metrics and /ui", k.Key)
			}
		}
	}
	if len(keys) != 2 {
		t.Fatalf("keys %v, want 2", keys)
	}
	for k := range keys {
		if !strings.HasPrefix(k, "web|user="+rls.HashPrefix) && !strings.HasPrefix(k, "web|route=/login|user="+rls.HashPrefix) {
			t.Errorf("key %q: want the value hashed and the configured /login shown", k)
		}
	}
}

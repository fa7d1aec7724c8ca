package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server"
)

func postJSON(t *testing.T, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestHTTPAllowKey(t *testing.T) {
	h := start(t, goldenRules)
	body := `{"key":"alice","rule":{"algorithm":"fixed_window","limit":2,"period":"1m"}}`
	var got []server.AllowResponse
	for range 3 {
		var r server.AllowResponse
		if code := postJSON(t, h.base+"/v1/allow", body, &r); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		got = append(got, r)
	}
	if !got[0].Allowed || got[0].Remaining != 1 || !got[1].Allowed || got[2].Allowed || got[2].RetryAfterMs != 60000 {
		t.Errorf("decisions: %+v", got)
	}
	var peek server.AllowResponse
	postJSON(t, h.base+"/v1/allow", `{"key":"bob","rule":{"limit":5,"period":"1s"},"n":0}`, &peek)
	if !peek.Allowed || peek.Remaining != 5 {
		t.Errorf("peek: %+v", peek)
	}
}

func TestHTTPAllowDescriptorsAndJSON(t *testing.T) {
	h := start(t, goldenRules)
	body := `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"h"}]}],"hits_addend":2}`
	var r server.AllowResponse
	postJSON(t, h.base+"/v1/allow", body, &r)
	if !r.Allowed || r.Code != "OK" || r.Remaining != 0 || len(r.Descriptors) != 1 || r.Limit != 2 {
		t.Errorf("descriptors form: %+v", r)
	}
	postJSON(t, h.base+"/v1/allow", body, &r)
	if r.Allowed || r.Code != "OVER_LIMIT" || r.RetryAfterMs <= 0 {
		t.Errorf("over limit: %+v", r)
	}
	// envoyproxy/ratelimit's /json: protobuf JSON in and out, 429 when over limit.
	var resp map[string]any
	if code := postJSON(t, h.base+"/json", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"h"}]}]}`, &resp); code != http.StatusTooManyRequests || resp["overallCode"] != "OVER_LIMIT" {
		t.Errorf("/json over limit: %d %v", code, resp)
	}
	if code := postJSON(t, h.base+"/json", `{"domain":"golden","descriptors":[{"entries":[{"key":"remote_address","value":"j"}]}]}`, &resp); code != http.StatusOK || resp["overallCode"] != "OK" {
		t.Errorf("/json ok: %d %v", code, resp)
	}
}

func TestHTTPHealthAndMetrics(t *testing.T) {
	h := start(t, goldenRules)
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/nope": 404} {
		resp, err := http.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	h.ask(t, "golden", desc("remote_address", "m"))
	page := h.metrics(t)
	for _, name := range []string{
		`sluice_decisions_total{domain="golden",result="ok",rule="golden.remote_address"} 1`,
		`sluice_request_duration_seconds_count{transport="grpc"} 1`,
		`sluice_config_reloads_total{result="failure"} 0`,
		"sluice_store_errors_total 0",
		"sluice_config_limits 6",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(page, name) {
			t.Errorf("metrics lack %q", name)
		}
	}
}

// TestHTTPRuleErrors checks the exact JSON of /v1/allow's answers to rules that sluice
// refuses: the field is named under "rule.".
func TestHTTPRuleErrors(t *testing.T) {
	h := start(t, goldenRules)
	for body, want := range map[string]string{
		`{"key":"k","rule":{"limit":0,"period":"1s"}}`:                     `{"error":"sluice: rule.limit: must be positive, got 0","code":"InvalidArgument"}`,
		`{"key":"k","rule":{"limit":1,"period":"1s","algorithm":"magic"}}`: `{"error":"sluice: rule.algorithm: unknown \"magic\" (want one of fixed_window, sliding_log, sliding_window, token_bucket, leaky_bucket, gcra)","code":"InvalidArgument"}`,
		`{"key":"k","rule":{"limit":1,"period":"1s","sub_windows":7}}`:     `{"error":"sluice: rule.sub_windows: period 1s does not divide into 7 whole-millisecond sub-windows","code":"InvalidArgument"}`,
		`{"key":"k","rule":{"limit":1,"period":"1s","burst":2}}`:           `{"error":"sluice: rule.burst: not used by sliding_window, got 2","code":"InvalidArgument"}`,
	} {
		resp, err := http.Post(h.base+"/v1/allow", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || string(got) != want+"\n" {
			t.Errorf("%s: %d %s\nwant 400 %s", body, resp.StatusCode, got, want)
		}
	}
}

// TestHTTPAllowCriticality: the key form's "criticality" reaches the engine: a supplied rule
// of 2 with a SHEDDABLE class gets the default shares (rls's
// TestCriticalityClassesShareOneCounter decides them).
func TestHTTPAllowCriticality(t *testing.T) {
	h := start(t, goldenRules)
	for i, want := range []string{`"allowed":true`, `"allowed":false`} {
		_, body := h.post(t, "/v1/allow", `{"key":"k","rule":{"limit":2,"period":"1m"},"criticality":"SHEDDABLE"}`)
		if !strings.Contains(body, want) {
			t.Errorf("key form, SHEDDABLE request %d on a limit of 2: %s, want %s", i, body, want)
		}
	}
}

package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// budgetRules: one domain whose proxy section keys a budget of 1,000 tokens a minute per
// X-Tenant, strict, reading OpenAI's API, and counts requests per tenant (so that a budget
// sits beside a rate limit).
const budgetRules = `
domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 1000}
proxy:
  rate_limits:
    - actions: [{request_headers: {header_name: X-Tenant, descriptor_key: tenant}}]
  budgets:
    - name: tokens
      actions: [{request_headers: {header_name: X-Tenant, descriptor_key: tenant}}]
      rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: fixed_window}
      mode: strict
`

// fakeLLM mounts an OpenAI-compatible chat completions endpoint on up: a prompt of
// ceil(len(messages)/4) tokens (the estimate's own arithmetic), and the number of output tokens
// the client asks for in X-Output, streamed one an event with the usage chunk last when the
// body asks to stream, else one JSON response with its usage.
func fakeLLM(up *upstream) {
	up.mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n, _ := strconv.Atoi(r.Header.Get("X-Output"))
		_, msgs, _ := strings.Cut(string(body), `"messages":`)
		msgs, _, _ = strings.Cut(msgs, `,"max_tokens"`)
		prompt := (len(msgs) + 3) / 4
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, n, prompt+n)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < n; i++ {
			if _, err := fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t\"}}]}\n\n"); err != nil {
				return
			}
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", prompt, n)
	})
}

// ask posts a chat request of tenant asking for at most max tokens (none when max < 0),
// of which the upstream produces out.
func ask(t *testing.T, base, tenant string, max, out int, stream bool) (*http.Response, string) {
	t.Helper()
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]`
	if max >= 0 {
		body += `,"max_tokens":` + strconv.Itoa(max)
	}
	body += `,"stream":` + strconv.FormatBool(stream) + `}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("X-Tenant", tenant)
	req.Header.Set("X-Output", strconv.Itoa(out))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestProxyBudget: the proxy section's budget: each request holds its maximum (max_tokens and
// its prompt: 9 tokens here) while forwarded and is charged the usage its response reports;
// the RateLimit header's remaining falls after each response by what it cost; a request whose
// maximum does not fit is denied 429 with the budget named and the upstream not asked; a
// stream that runs past its reservation is extended as it flows and cut within one event when
// the budget is spent, with OpenAI's error chunk; a body that is not a JSON request is 400.
func TestProxyBudget(t *testing.T) {
	up := newUpstream(t)
	fakeLLM(up)
	p := startProxy(t, up, budgetRules)
	resp, _ := ask(t, p.base, "a", 100, 40, false) // 9 + 40 charged
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("RateLimit"), `"tokens";r=1000;`) {
		t.Fatalf("first: %d %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	resp, _ = ask(t, p.base, "a", 200, 100, true) // 9 + 100 charged: 842 left
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("RateLimit"), `"tokens";r=951;`) {
		t.Fatalf("second: %d %q, want 951 remaining", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	hits := up.hits.Load()
	resp, body := ask(t, p.base, "a", 900, 1, false)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"violated-policies":["tokens"]`) || up.hits.Load() != hits {
		t.Fatalf("over the budget: %d %s (upstream asked %d times more)", resp.StatusCode, body, up.hits.Load()-hits)
	}
	// no max_tokens: the estimate's default of 4,096 does not fit; a stream of 100 asked for
	// 10 runs past its reservation of 19 and is extended
	resp, body = ask(t, p.base, "a", 10, 100, true)
	if resp.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || strings.Contains(body, `"error"`) {
		t.Fatalf("an extended stream: %d %.200s", resp.StatusCode, body)
	}
	// 842 - 109 = 733 left: a stream asked for 10 producing 2000 is cut when they are spent
	resp, body = ask(t, p.base, "a", 10, 2000, true)
	content := strings.Count(body, `"content"`)
	sc := bufio.NewScanner(strings.NewReader(body))
	var last []string
	for sc.Scan() {
		if sc.Text() != "" {
			last = append(last, sc.Text())
		}
	}
	if resp.StatusCode != 200 || content != 733-9 || len(last) < 2 || !strings.Contains(last[len(last)-2], `"error"`) || last[len(last)-1] != "data: [DONE]" {
		t.Fatalf("the cut stream: %d, %d content events (want %d), ending %v", resp.StatusCode, content, 733-9, last[max(0, len(last)-2):])
	}
	if resp, _ = ask(t, p.base, "a", 0, 0, false); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the budget spent: %d", resp.StatusCode)
	}
	if resp, _ = ask(t, p.base, "b", 50, 50, true); resp.StatusCode != 200 {
		t.Fatalf("another tenant: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, p.base+"/v1/chat/completions", strings.NewReader("not json"))
	req.Header.Set("X-Tenant", "c")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body that is not JSON: %v %v", r, err)
	}
}

// TestProxyBudgetPrices: a budget of money counts the price of the usage (micro-units), and a
// model the price table does not list is refused 400 before anything is reserved.
func TestProxyBudgetPrices(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prices.yaml"), []byte("models:\n  gpt-4o: {input: 2.5, output: 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := strings.ReplaceAll(budgetRules, "      mode: strict\n", "      mode: strict\n      prices: "+filepath.Join(dir, "prices.yaml")+"\n")
	up := newUpstream(t)
	fakeLLM(up)
	p := startProxy(t, up, rules)
	// the budget is 1,000 µ$ a minute: 9 input tokens at $2.50/M and 50 output at $10/M,
	// 522.5 rounded up, are held and charged
	if resp, body := ask(t, p.base, "a", 50, 50, false); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := ask(t, p.base, "a", 50, 50, false); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(resp.Header.Get("RateLimit"), `"tokens";r=477;`) {
		t.Fatalf("523 of 477 left: %d %q %s", resp.StatusCode, resp.Header.Get("RateLimit"), body)
	}
	req, _ := http.NewRequest(http.MethodPost, p.base+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-unknown","max_tokens":1}`))
	req.Header.Set("X-Tenant", "b")
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != http.StatusBadRequest {
		t.Fatalf("an unknown model: %v %v", r, err)
	}
	b, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(b), "not in the price table") || strings.Contains(string(b), "gpt-unknown") {
		t.Fatalf("an unknown model: %s", b)
	}
}

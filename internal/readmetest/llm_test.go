package readmetest

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestReadmeLLMBudget follows the README's "An LLM API behind the proxy": its rules are
// examples/llm/rules.yaml as they stand, and its command runs on a built sluice in front of an
// OpenAI-compatible fake (for the upstream the README names, answering the usage of its
// prompt, 9 tokens, and of max_tokens, streamed or not) and on the tests' Redis. What the
// section says holds for one tenant: its requests are forwarded with the RateLimit of both
// budgets; the token budget's remaining falls after each response by what the response cost
// (bounded: a request is admitted while one token is left); once it is spent, a 429 names the
// token budget alone (its body and RateLimit), with a Retry-After within its minute; a request whose max_tokens is
// more than the whole budget is refused.
func TestReadmeLLMBudget(t *testing.T) {
	lines := section(t, "README.md", "An LLM API behind the proxy")
	text := strings.Join(lines, "\n")
	_, yml, ok := strings.Cut(text, "```yaml\n# examples/llm/rules.yaml\n")
	yml, _, _ = strings.Cut(yml, "```")
	if !ok || yml != read(t, "examples/llm/rules.yaml") {
		t.Fatalf("the README's rules are not examples/llm/rules.yaml as it stands:\n%s", yml)
	}
	var cmd []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "    sluice proxy "); ok {
			cmd = strings.Fields(rest)
		}
	}
	want := []string{"--upstream", "https://api.openai.com", "--config", "examples/llm/rules.yaml", "--store", "redis://127.0.0.1:6379"}
	if strings.Join(cmd, " ") != strings.Join(want, " ") {
		t.Fatalf("the README's command is %v, the test follows %v", cmd, want)
	}
	up := httptest.NewServer(http.HandlerFunc(fakeOpenAI))
	defer up.Close()
	bin := buildSluice(t)
	addr := testenv.FreeAddr(t)
	cmd[1], cmd[5] = up.URL, "redis://"+testenv.RedisAddr(t)
	var out testenv.LogBuffer
	exited := start(t, root, &out, bin, append([]string{"proxy", "--http-addr", addr, "--admin-addr", "-"}, cmd...)...)
	waitHTTP(t, "http://"+addr+"/", exited)
	defer func() {
		if t.Failed() {
			t.Logf("sluice proxy's output:\n%s", out.String())
		}
	}()
	post := func(tenant, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Tenant", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	chat := func(maxTokens int, stream bool) string {
		return fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}],"max_tokens":%d,"stream":%v}`, maxTokens, stream)
	}
	// follow sends one tenant's requests, and says how an answer differs from the section.
	follow := func(tenant string) error {
		var got []string
		for _, step := range []struct {
			body      string
			status    int
			remaining int64 // the token budget's r
		}{
			{chat(1, true), 200, 100_000},      // costs 9 + 1
			{chat(99_980, false), 200, 99_990}, // costs 9 + 99,980: one token left
			{chat(5, true), 200, 1},            // bounded: admitted on the last token; costs 14
			{chat(5, false), 429, 0},           // spent
		} {
			resp, body := post(tenant, step.body)
			rl := resp.Header.Get("RateLimit")
			got = append(got, fmt.Sprintf("%d %s", resp.StatusCode, rl))
			if resp.StatusCode != step.status || budgetRemaining(rl, "tokens") != step.remaining || (step.status == 200) != (budgetRemaining(rl, "dollars") >= 0) {
				return fmt.Errorf("tenant %s: %s answered %s, want %d with tokens r=%d (and the dollars' when admitted); so far:\n%s",
					tenant, step.body, got[len(got)-1], step.status, step.remaining, strings.Join(got, "\n"))
			}
			if retry, err := strconv.Atoi(resp.Header.Get("Retry-After")); step.status == 429 &&
				(err != nil || retry < 1 || retry > 60 || !strings.Contains(body, `"tokens"`) || strings.Contains(body, `"dollars"`)) {
				return fmt.Errorf("the denial of a spent token budget: Retry-After %q, body %s", resp.Header.Get("Retry-After"), body)
			}
		}
		return nil
	}
	// The token budget is a fixed window of a minute aligned to the epoch: steps that straddle
	// a minute's end see a fresh budget, and are followed again (once: they take well under a
	// minute) for a new tenant.
	for attempt := 0; ; attempt++ {
		minute := time.Now().Unix() / 60
		err := follow(fmt.Sprintf("readme-%x", rand.Uint64()))
		if err == nil {
			break
		}
		if attempt > 0 || time.Now().Unix()/60 == minute {
			t.Fatal(err)
		}
	}
	resp, body := post(fmt.Sprintf("readme-%x", rand.Uint64()), chat(200_000, false))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"tokens"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("200,000 tokens of a 100,000 budget: %d %q %s", resp.StatusCode, resp.Header.Get("RateLimit"), body)
	}
}

var remainingRE = regexp.MustCompile(`"([^"]+)";r=(\d+)`)

// budgetRemaining returns the r of policy name in a RateLimit header, -1 when absent.
func budgetRemaining(header, name string) int64 {
	for _, m := range remainingRE.FindAllStringSubmatch(header, -1) {
		if m[1] == name {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			return n
		}
	}
	return -1
}

// fakeOpenAI answers a Chat Completions request as OpenAI does, with a usage of 9 prompt
// tokens and max_tokens completion tokens: a JSON body, or with "stream": true an event stream
// whose last chunk carries the usage (the shapes of budget/testdata's examples).
func fakeOpenAI(w http.ResponseWriter, r *http.Request) {
	var req struct {
		MaxTokens int64 `json:"max_tokens"`
		Stream    bool  `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	usage := fmt.Sprintf(`{"prompt_tokens":9,"completion_tokens":%d,"total_tokens":%d}`, req.MaxTokens, 9+req.MaxTokens)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":%s}`, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n")
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":%s}\n\ndata: [DONE]\n\n", usage)
}

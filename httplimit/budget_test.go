package httplimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/sluicetest"
)

// llmHandler is a fake OpenAI-compatible chat completions endpoint: a prompt of 10 tokens and
// the request's "n" output tokens (a query parameter), streamed one an event with the usage
// chunk last when the body asks "stream": true, else one JSON response with its usage. A
// streamed one records whether a write failed (the middleware cut it).
type llmHandler struct {
	cut chan error
}

func (h llmHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	const prompt = 10
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"gpt-4o","usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, n, prompt+n)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var err error
	for i := 0; i < n && err == nil; i++ {
		_, err = fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t\"}}]}\n\n")
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", prompt, n)
	}
	if h.cut != nil {
		h.cut <- err
	}
}

// chat posts a chat request asking for max tokens (n of which the handler produces) to h.
func chat(h http.Handler, key string, max, n int, stream bool) *httptest.ResponseRecorder {
	body := fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":%v}`, max, stream)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions?n="+strconv.Itoa(n), strings.NewReader(body))
	r.Header.Set("X-Tenant", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestBudgetWithLLM: a budget of tokens per tenant in front of an LLM API: each request holds
// its estimate (max_tokens and its prompt) while it runs and is charged what its response
// reports; the RateLimit remaining falls after each response by what it cost; a request
// whose estimate does not fit a strict budget is denied, the budget named with when it frees;
// a streamed response that runs past what is left is cut within one event with OpenAI's error
// chunk, the handler's next write failing. On memory and Redis.
func TestBudgetWithLLM(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		cut := make(chan error, 1)
		rule := sluice.FixedWindow(1000, time.Minute)
		h := mustNew(t, l, WithLLM(LLM{}), WithLimits(Limit{Name: "tokens", Rule: rule, Key: KeyHeader("X-Tenant"),
			Budget: &sluice.Budget{Mode: sluice.Strict}}))(llmHandler{cut: cut})
		// the messages' 32 bytes are estimated at 8 tokens: 208 held; 10 + 50 charged
		w := chat(h, "a", 200, 50, false)
		if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "1000" {
			t.Fatalf("first: %d remaining %q", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
		w = chat(h, "a", 300, 100, false) // 60 charged before it: 940 left; 110 charged
		if w.Code != http.StatusOK || w.Header().Get("X-RateLimit-Remaining") != "940" {
			t.Fatalf("second: %d remaining %q, want 940", w.Code, w.Header().Get("X-RateLimit-Remaining"))
		}
		if got := w.Header().Get("RateLimit"); !strings.Contains(got, `"tokens";r=940`) {
			t.Fatalf("RateLimit %q", got)
		}
		// 830 left; a request of at most 908 does not fit: denied, named
		w = chat(h, "a", 900, 1, false)
		if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"violated-policies":["tokens"]`) || w.Header().Get("Retry-After") == "" {
			t.Fatalf("over the budget: %d %s retry %q", w.Code, w.Body.String(), w.Header().Get("Retry-After"))
		}
		// a stream asking for 100 (108 held) running to 900 tokens: extended as it flows, cut
		// when the 830 are spent: 8 estimated input tokens and 822 events
		w = chat(h, "a", 100, 900, true)
		if err := <-cut; !errors.Is(err, budget.ErrCut) {
			t.Fatalf("the handler's write after the cut: %v", err)
		}
		evs := 0
		var last []string
		sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				evs++
				last = append(last, sc.Text())
			}
		}
		if evs != 822+2 || !strings.Contains(last[len(last)-2], `"error"`) || last[len(last)-1] != "data: [DONE]" {
			t.Fatalf("the cut stream: %d events, ending %v", evs, last[len(last)-2:])
		}
		if w = chat(h, "a", 1, 1, false); w.Code != http.StatusTooManyRequests {
			t.Fatalf("after the budget is spent: %d", w.Code)
		}
		// another tenant has its own
		if w = chat(h, "b", 100, 10, true); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "[DONE]") {
			t.Fatalf("tenant b: %d", w.Code)
		}
		<-cut
	})
}

// TestBudgetCommitsTheReportedCost: without WithLLM, a budget's cost is the middleware's
// (WithCost) and the handler reports the real one with Settle; a handler that reports none
// keeps the estimate.
func TestBudgetCommitsTheReportedCost(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		rule := sluice.TokenBucket(100, time.Hour, 100)
		h := mustNew(t, l, WithCost(func(*http.Request) int64 { return 40 }), WithLimits(Limit{Name: "bytes", Rule: rule,
			Budget: &sluice.Budget{}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.URL.Query().Get("real"); v != "" {
				n, _ := strconv.ParseInt(v, 10, 64)
				if !Settle(r, n) {
					t.Error("Settle: false")
				}
			}
		}))
		get(h, "/?real=5", nil) // 5 charged
		get(h, "/", nil)        // the 40 stand
		if d, err := l.Peek(context.Background(), "http:bytes:192.0.2.1", rule); err != nil || d.Remaining != 55 {
			t.Fatalf("remaining %d %v, want 55", d.Remaining, err)
		}
	})
}

// TestBudgetCountsADisconnectedClient: a client that goes away mid-stream is charged what the
// handler produced until then.
func TestBudgetCountsADisconnectedClient(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := backends[0].open(t, clock)
	rule := sluice.FixedWindow(10_000, time.Minute)
	produced := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	h := mustNew(t, l, WithLLM(LLM{}), WithLimits(Limit{Name: "tokens", Rule: rule, Key: KeyHeader("X-Tenant"),
		Budget: &sluice.Budget{}}))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		n := 0
		for ; n < 1000; n++ {
			if n == 30 {
				cancel() // the client goes away
			}
			if r.Context().Err() != nil {
				break
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t\"}}]}\n\n")
		}
		produced <- n
	}))
	body := `{"model":"gpt-4o","messages":[],"max_tokens":2000,"stream":true}` // 1 prompt token
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)).WithContext(ctx)
	r.Header.Set("X-Tenant", "t")
	h.ServeHTTP(httptest.NewRecorder(), r)
	n := <-produced
	if d, _ := l.Peek(context.Background(), "http:tokens:t", rule); d.Remaining != 10_000-1-int64(n) {
		t.Fatalf("remaining %d, want %d (1 prompt token and the %d events produced)", d.Remaining, 10_000-1-n, n)
	}
}

// TestBudgetBadRequests: a body that is not a JSON request, or too large, is answered before
// anything is reserved; a model a price table does not list is answered 400.
func TestBudgetBadRequests(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	l := backends[0].open(t, clock)
	prices, err := budget.LoadPrices([]byte("models:\n  gpt-4o: {input: 2.5, output: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := mustNew(t, l, WithLLM(LLM{MaxBody: 200, Charges: map[string]budget.Charge{"usd": prices.Cost}}), WithLimits(
		Limit{Name: "usd", Rule: sluice.FixedWindow(1_000_000, time.Hour), Budget: &sluice.Budget{}}))(llmHandler{})
	for _, c := range []struct {
		body string
		code int
	}{
		{`not json`, http.StatusBadRequest},
		{`{"model":"gpt-4o","max_tokens":-1}`, http.StatusBadRequest},
		{`{"model":"unknown-model","max_tokens":10}`, http.StatusBadRequest},
		{`{"model":"gpt-4o","messages":"` + strings.Repeat("x", 300) + `"}`, http.StatusRequestEntityTooLarge},
		{`{"model":"gpt-4o","max_tokens":10}`, http.StatusOK},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/?n=10", strings.NewReader(c.body)))
		if w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.body, w.Code, w.Body.String(), c.code)
		}
	}
	// only the last was charged: its 10 output tokens at $10/M and 10 input at $2.50/M: 125 µ$
	if d, _ := l.Peek(context.Background(), "http:usd:192.0.2.1", sluice.FixedWindow(1_000_000, time.Hour)); d.Remaining != 1_000_000-125 {
		t.Fatalf("remaining %d", d.Remaining)
	}
}

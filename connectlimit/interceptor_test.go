package connectlimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
)

var perKey = connectlimit.Limit{Name: "per-key", Rule: sluice.FixedWindow(2, time.Hour), Key: connectlimit.KeyHeader("X-API-Key")}

// TestDenial: over each protocol, a call past its limit is answered CodeResourceExhausted
// without running the handler, with the RetryInfo and QuotaFailure details the client parses,
// Retry-After and the rate-limit headers; another key keeps its own budget.
func TestDenial(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(perKey))
			s := serve(t, in, tr)
			for i := range 2 {
				if _, err := s.ping(t, nil, "X-API-Key", "alice"); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			_, err := s.ping(t, nil, "X-API-Key", "alice")
			r := refusalOf(t, err)
			if r.code != connect.CodeResourceExhausted || !strings.Contains(r.msg, "rate limit exceeded (per-key)") {
				t.Fatalf("third call: %v %q, want ResourceExhausted naming the limit", r.code, r.msg)
			}
			if r.retry.GetRetryDelay().AsDuration() != time.Hour {
				t.Errorf("retry info %v, want 1h (the window's end)", r.retry)
			}
			if v := r.quota.GetViolations(); len(v) != 1 || v[0].QuotaId != "per-key" || v[0].QuotaValue != 2 || !strings.HasPrefix(v[0].Subject, "per-key:") {
				t.Errorf("quota failure %v, want one violation of per-key, capacity 2", r.quota)
			}
			for name, want := range map[string]string{
				"Retry-After":       "3600",
				"Ratelimit":         `"per-key";r=0;t=3600`,
				"Ratelimit-Policy":  `"per-key";q=2;w=3600`,
				"X-Ratelimit-Limit": "2",
			} {
				if got := r.meta.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if n := s.calls.Load(); n != 2 {
				t.Errorf("%d calls ran the handler, want 2", n)
			}
			if _, err := s.ping(t, nil, "X-API-Key", "bob"); err != nil {
				t.Errorf("bob, another key: %v", err)
			}
			if st := in.Stats(); st.Allowed.Load() != 3 || st.Denied.Load() != 1 {
				t.Errorf("stats allowed %d denied %d, want 3 and 1", st.Allowed.Load(), st.Denied.Load())
			}
		})
	}
}

// TestConnectErrorFormat: the denial as Connect's protocol puts it on the wire, read with a
// plain HTTP client: status 429 (Connect's mapping of resource_exhausted), Retry-After and the
// rate-limit headers, and the JSON error body with its code, message and the two details by
// their type names.
func TestConnectErrorFormat(t *testing.T) {
	in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(connectlimit.Limit{Name: "all", Rule: sluice.FixedWindow(1, time.Minute)}))
	s := serve(t, in, transports[0])
	post := func() *http.Response {
		t.Helper()
		resp, err := s.client.Post(s.url+pingProcedure, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	if resp := post(); resp.StatusCode != http.StatusOK || resp.Header.Get("Ratelimit") != `"all";r=0;t=60` {
		t.Fatalf("first call: %s, RateLimit %q", resp.Status, resp.Header.Get("Ratelimit"))
	}
	resp := post()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" || resp.Header.Get("Ratelimit") != `"all";r=0;t=60` {
		t.Fatalf("second call: %s, Retry-After %q, RateLimit %q; want 429, 60, r=0", resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Ratelimit"))
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if e.Code != "resource_exhausted" || e.Message != "connectlimit: rate limit exceeded (all); retry in 1m0s" ||
		len(e.Details) != 2 || e.Details[0].Type != "google.rpc.RetryInfo" || e.Details[1].Type != "google.rpc.QuotaFailure" || e.Details[0].Value == "" {
		t.Errorf("body %s, want code resource_exhausted, the message, RetryInfo and QuotaFailure", body)
	}
}

// TestHeaderStyles: an admitted call carries the rate-limit headers of its style in its
// response headers (none for HeadersOnDenial and HeadersNone); a refused one carries them with
// HeadersOnDenial too, Retry-After always.
func TestHeaderStyles(t *testing.T) {
	ietf, x := []string{"Ratelimit", "Ratelimit-Policy"}, []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}
	for _, tc := range []struct {
		style            httplimit.HeaderStyle
		allowed, refused []string // headers present
	}{
		{httplimit.HeadersBoth, append(ietf, x...), append(append(ietf, x...), "Retry-After")},
		{httplimit.HeadersIETF, ietf, append(ietf, "Retry-After")},
		{httplimit.HeadersX, x, append(x, "Retry-After")},
		{httplimit.HeadersOnDenial, nil, append(x, "Retry-After")},
		{httplimit.HeadersNone, nil, []string{"Retry-After"}},
	} {
		t.Run(tc.style.String(), func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(perKey), connectlimit.WithHeaderStyle(tc.style))
			s := serve(t, in, transports[0])
			res, err := s.ping(t, nil, "X-API-Key", "alice")
			if err != nil {
				t.Fatal(err)
			}
			checkHeaders(t, "admitted", res.Header(), tc.allowed)
			_, _ = s.ping(t, nil, "X-API-Key", "alice")
			_, err = s.ping(t, nil, "X-API-Key", "alice")
			checkHeaders(t, "refused", refusalOf(t, err).meta, tc.refused)
		})
	}
}

// checkHeaders checks that h has the rate-limit headers of want and no other.
func checkHeaders(t *testing.T, what string, h http.Header, want []string) {
	t.Helper()
	for _, name := range []string{"Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"} {
		wanted := false
		for _, w := range want {
			wanted = wanted || w == name
		}
		if (h.Get(name) != "") != wanted {
			t.Errorf("%s call: %s %q, want present %v", what, name, h.Get(name), wanted)
		}
	}
}

// TestExactUnderConcurrency: over each protocol, 200 concurrent calls against a limit of 50
// admit exactly 50, and exactly those run the handler.
func TestExactUnderConcurrency(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(connectlimit.Limit{Name: "all", Rule: sluice.FixedWindow(50, time.Hour), Key: connectlimit.KeyProcedure()}))
			exact(t, serve(t, in, tr), in, 50)
		})
	}
}

// exact makes 200 concurrent calls through s and checks that limit of them were admitted.
func exact(t *testing.T, s *server, in *connectlimit.Interceptor, limit int) {
	t.Helper()
	var mu sync.Mutex
	codes := map[connect.Code]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				_, err := s.ping(t, nil)
				mu.Lock()
				code := connect.Code(0) // OK
				if err != nil {
					code = connect.CodeOf(err)
				}
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if codes[0] != limit || codes[connect.CodeResourceExhausted] != 200-limit || len(codes) != 2 {
		t.Errorf("codes %v, want %d admitted and the rest ResourceExhausted", codes, limit)
	}
	if n := s.calls.Load(); n != int64(limit) {
		t.Errorf("%d calls ran the handler, want %d", n, limit)
	}
	if st := in.Stats(); st.Allowed.Load() != uint64(limit) || st.Denied.Load() != uint64(200-limit) {
		t.Errorf("stats allowed %d denied %d", st.Allowed.Load(), st.Denied.Load())
	}
}

// TestRoutes: the most specific route applies: a procedure's own, then its service's, then
// the default; a route without limits exempts its calls.
func TestRoutes(t *testing.T) {
	one := func(name string) []connectlimit.Limit {
		return []connectlimit.Limit{{Name: name, Rule: sluice.FixedWindow(1, time.Hour)}}
	}
	for _, tc := range []struct {
		name   string
		routes []connectlimit.Route
		pings  int // Pings admitted of 3
	}{
		{"default", []connectlimit.Route{{Limits: one("all")}}, 1},
		{"service", []connectlimit.Route{{Limits: one("all")}, {Procedure: "/sluice.test.v1.Test/", Limits: []connectlimit.Limit{{Name: "svc", Rule: sluice.FixedWindow(2, time.Hour)}}}}, 2},
		{"exempt procedure", []connectlimit.Route{{Limits: one("all")}, {Procedure: pingProcedure}}, 3},
		{"other procedure", []connectlimit.Route{{Procedure: watchProcedure, Limits: one("watch")}}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), tc.routes)
			s := serve(t, in, transports[0])
			for range 3 {
				_, _ = s.ping(t, nil)
			}
			if n := s.calls.Load(); n != int64(tc.pings) {
				t.Errorf("%d of 3 pings admitted, want %d", n, tc.pings)
			}
		})
	}
}

// TestNewErrors: each configuration problem is refused, naming its field.
func TestNewErrors(t *testing.T) {
	l := sluice.New(nil)
	ok := connectlimit.Limit{Name: "ok", Rule: sluice.PerMinute(1)}
	for _, tc := range []struct {
		name   string
		l      *sluice.Limiter
		routes []connectlimit.Route
		opts   []connectlimit.Option
		want   string
	}{
		{"procedure without slash", l, []connectlimit.Route{{Procedure: "pkg.S/M"}}, nil, "routes[0].procedure"},
		{"procedure with three parts", l, []connectlimit.Route{{Procedure: "/pkg.S/M/x"}}, nil, "routes[0].procedure"},
		{"route twice", l, []connectlimit.Route{{Procedure: "/a.S/"}, {Procedure: "/a.S/"}}, nil, "routes[1].procedure"},
		{"unnamed limit", l, every(connectlimit.Limit{Rule: sluice.PerMinute(1)}), nil, "routes[0].limits[0].name"},
		{"bad rule", l, every(ok, connectlimit.Limit{Name: "bad", Rule: sluice.PerMinute(0)}), nil, `routes[0].limits[1] ("bad").rule`},
		{"one name twice in a route", l, every(ok, ok), nil, "routes[0].limits[1].name"},
		{"nil limiter", nil, every(ok), nil, "limiter"},
		{"bad failure policy", l, every(ok), []connectlimit.Option{connectlimit.WithFailurePolicy(99)}, "failure_policy"},
		{"local without a local limiter", l, every(ok), []connectlimit.Option{connectlimit.WithFailurePolicy(distributed.FailLocal)}, "local_limiter"},
		{"negative wait", l, nil, []connectlimit.Option{connectlimit.WithWait(-1)}, "wait"},
	} {
		_, err := connectlimit.New(tc.l, tc.routes, tc.opts...)
		if err == nil || !strings.HasPrefix(err.Error(), "connectlimit: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	if in, err := connectlimit.New(nil, nil); err != nil || in == nil {
		t.Errorf("no limits and no limiter: %v, want an interceptor that passes every call", err)
	}
}

// TestStream: a stream is decided when it opens, over HTTP/1.1 and HTTP/2: past its limit it
// ends with the refusal before the handler runs.
func TestStream(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), []connectlimit.Route{
				{Procedure: watchProcedure, Limits: []connectlimit.Limit{{Name: "watch", Rule: sluice.FixedWindow(2, time.Hour), Key: connectlimit.KeyProcedure()}}}})
			s := serve(t, in, tr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 2 {
				st, err := s.watch(ctx, nil)
				if err != nil {
					t.Fatalf("stream %d: %v", i, err)
				}
				if got := st.ResponseHeader().Get("Ratelimit"); got != fmt.Sprintf(`"watch";r=%d;t=3600`, 1-i) {
					t.Errorf("stream %d: RateLimit %q", i, got)
				}
				_ = st.Close()
			}
			_, err := s.watch(ctx, nil)
			r := refusalOf(t, err)
			if r.code != connect.CodeResourceExhausted || r.retry == nil || r.quota.GetViolations()[0].QuotaId != "watch" {
				t.Fatalf("third stream: %v %q retry %v quota %v", r.code, r.msg, r.retry, r.quota)
			}
			if n := s.calls.Load(); n != 2 {
				t.Errorf("%d streams ran the handler, want 2", n)
			}
		})
	}
}

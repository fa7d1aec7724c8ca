package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	tollbooth "github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"
	sethvargo "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
)

// The middleware workloads: the per-request cost of each rate-limiting middleware on its
// in-memory store, through httptest requests and a ResponseWriter that keeps nothing (no
// network), keyed by client IP (RemoteAddr) from 1024 clients in turn. "allowed": 10^9
// requests a minute, so every request passes; "denied": 1 an hour, so after each client's first
// request every one is answered by the middleware's denial. "bare" is the handler alone:
// subtract it for the middleware's overhead. cpu-ns/op is the process's CPU time per request
// (garbage collection included), steadier than ns/op on a shared machine.
//
// Run the whole benchmark several times rather than with -count (which repeats each
// contender back to back) and compare medians:
//
//	cd bench && go test -c -o mw.test . && for i in $(seq 8); do ./mw.test -test.run '^$' -test.bench 'HTTPMiddleware/' -test.benchmem; done | tee mw.txt

// middlewareContender wraps a handler in one middleware under a limit per period.
type middlewareContender struct {
	name string
	wrap func(limit int64, period time.Duration, next http.Handler) http.Handler
}

func middlewareContenders() []middlewareContender {
	sluiceWith := func(style httplimit.HeaderStyle) func(int64, time.Duration, http.Handler) http.Handler {
		return func(limit int64, period time.Duration, next http.Handler) http.Handler {
			s, err := memory.New()
			if err != nil {
				panic(err)
			}
			mw, err := httplimit.New(sluice.New(s), httplimit.WithHeaderStyle(style),
				httplimit.WithLimits(httplimit.Limit{Name: "ip", Rule: sluice.Per(limit, period)}))
			if err != nil {
				panic(err)
			}
			return mw(next)
		}
	}
	return []middlewareContender{
		{"bare", func(_ int64, _ time.Duration, next http.Handler) http.Handler { return next }},
		{"sluice", sluiceWith(httplimit.HeadersBoth)},
		{"sluice_x_headers", sluiceWith(httplimit.HeadersX)},
		{"sluice_no_headers", sluiceWith(httplimit.HeadersNone)},
		{"httprate", func(limit int64, period time.Duration, next http.Handler) http.Handler {
			return httprate.LimitBy(int(limit), period, httprateKeyByIP)(next)
		}},
		{"ulule", func(limit int64, period time.Duration, next http.Handler) http.Handler {
			l := ulule.New(ululememory.NewStore(), ulule.Rate{Period: period, Limit: limit})
			return ululestdlib.NewMiddleware(l).Handler(next)
		}},
		{"sethvargo", func(limit int64, period time.Duration, next http.Handler) http.Handler {
			s, err := memorystore.New(&memorystore.Config{Tokens: uint64(limit), Interval: period})
			if err != nil {
				panic(err)
			}
			m, err := sethvargo.NewMiddleware(s, sethvargo.IPKeyFunc())
			if err != nil {
				panic(err)
			}
			return m.Handle(next)
		}},
		{"tollbooth", func(limit int64, period time.Duration, next http.Handler) http.Handler {
			l := tollbooth.NewLimiter(float64(limit)/period.Seconds(), nil)
			l.SetIPLookups([]string{"RemoteAddr"})
			return tollbooth.LimitHandler(l, next)
		}},
	}
}

// httprateKeyByIP is httprate's deprecated KeyByIP (the peer from RemoteAddr), which its
// documentation asks users to write themselves.
func httprateKeyByIP(r *http.Request) (string, error) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(ip), nil
}

// processCPU is the CPU time (user and system) of the whole process so far, garbage
// collection included: on a busy machine it is steadier than wall-clock ns/op, which counts
// the time other processes held the CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardWriter is a ResponseWriter that keeps only the status; ServeHTTP's caller clears its
// header map between requests.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

var okBody = []byte("ok\n")

var helloHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(okBody) })

// clientRequests are GET requests from 1024 client addresses.
var clientRequests = func() []*http.Request {
	out := make([]*http.Request, 1024)
	for i := range out {
		r := httptest.NewRequest(http.MethodGet, "/items/42", nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:43210", i>>16&255, i>>8&255, i&255)
		out[i] = r
	}
	return out
}()

func BenchmarkHTTPMiddleware(b *testing.B) {
	for _, tc := range []struct {
		name   string
		limit  int64
		period time.Duration
		want   int
	}{
		{"allowed", 1_000_000_000, time.Minute, http.StatusOK},
		{"denied", 1, time.Hour, http.StatusTooManyRequests},
	} {
		for _, c := range middlewareContenders() {
			b.Run(tc.name+"/"+c.name, func(b *testing.B) {
				h := c.wrap(tc.limit, tc.period, helloHandler)
				w := &discardWriter{h: http.Header{}}
				for _, r := range clientRequests { // each client's first request (the denied case's only allowed one)
					h.ServeHTTP(w, r)
					clear(w.h)
				}
				want := tc.want
				if c.name == "bare" {
					want = http.StatusOK
				}
				w.code = http.StatusOK
				b.ReportAllocs()
				b.ResetTimer()
				start := processCPU()
				for i := 0; b.Loop(); i++ {
					clear(w.h)
					w.code = http.StatusOK
					h.ServeHTTP(w, clientRequests[i&1023])
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
				if w.code != want {
					b.Fatalf("status %d, want %d", w.code, want)
				}
			})
		}
	}
}

// TestMiddlewareContenders checks the harness: each contender allows the allowed workload and
// denies the denied one, so the benchmark compares like with like.
func TestMiddlewareContenders(t *testing.T) {
	for _, c := range middlewareContenders() {
		if c.name == "bare" {
			continue
		}
		for _, tc := range []struct {
			limit  int64
			period time.Duration
			want   []int
		}{
			{1_000_000_000, time.Minute, []int{200, 200, 200}},
			{1, time.Hour, []int{200, 429, 429}},
		} {
			h := c.wrap(tc.limit, tc.period, helloHandler)
			for i, want := range tc.want {
				w := &discardWriter{h: http.Header{}, code: http.StatusOK}
				h.ServeHTTP(w, clientRequests[0].WithContext(context.Background()))
				if w.code != want {
					t.Errorf("%s, %d per %v, request %d: status %d, want %d", c.name, tc.limit, tc.period, i+1, w.code, want)
				}
			}
		}
	}
}

package httplimit

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/store/memory"
)

func BenchmarkSetHeaders(b *testing.B) {
	results := []Result{{Name: "ip", Rule: sluice.PerMinute(1e9), Decision: sluice.Decision{Allowed: true, Capacity: 1e9, Remaining: 999_999_123, ResetAfter: 60 * time.Second}}}
	policy := policyValue(results)
	for _, style := range []HeaderStyle{HeadersBoth, HeadersIETF, HeadersX, HeadersNone} {
		b.Run(style.String(), func(b *testing.B) {
			h := http.Header{}
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(0, &ru0)
			for b.Loop() {
				clear(h)
				setHeaders(h, style, results, policy, t0.UnixNano())
			}
			_ = syscall.Getrusage(0, &ru1)
			b.ReportMetric(float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkMiddleware measures the middleware's per-request CPU on the memory store: a limit
// by client IP with every header style, and a hot query parameter whose values stay cold.
func BenchmarkMiddleware(b *testing.B) {
	s, err := memory.New()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := sluice.New(s)
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	reqs := make([]*http.Request, 256)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/items?id="+strconv.Itoa(i%16), nil)
		reqs[i].RemoteAddr = "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":1234"
	}
	for _, tc := range []struct {
		name   string
		limit  int64
		style  HeaderStyle
		policy Limit
	}{
		{"allowed/both", 1e9, HeadersBoth, Limit{Name: "ip", Rule: sluice.PerMinute(1e9)}},
		{"allowed/none", 1e9, HeadersNone, Limit{Name: "ip", Rule: sluice.PerMinute(1e9)}},
		{"denied/both", 1, HeadersBoth, Limit{Name: "ip", Rule: sluice.PerHour(1)}},
		{"hot/none", 1e9, HeadersNone, Limit{Name: "item", Rule: sluice.PerMinute(1e9), Key: KeyQuery("id"), Hot: &hotkey.Config{}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.policy.Name += strings.ReplaceAll(tc.name, "/", "-")
			h := Middleware(l, WithHeaderStyle(tc.style), WithLimits(tc.policy))(next)
			w := &benchWriter{h: http.Header{}}
			for _, r := range reqs {
				h.ServeHTTP(w, r)
			}
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(0, &ru0)
			for i := 0; b.Loop(); i++ {
				clear(w.h)
				h.ServeHTTP(w, reqs[i&255])
			}
			_ = syscall.Getrusage(0, &ru1)
			b.ReportMetric(float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchWriter is a ResponseWriter that keeps nothing but its header map.
type benchWriter struct{ h http.Header }

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *benchWriter) WriteHeader(int)             {}

package httplimit

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// backend is a store the middleware tests run on, deciding on clock.
type backend struct {
	name string
	open func(t *testing.T, clock sluice.Clock) *sluice.Limiter
}

var backends = []backend{
	{"memory", func(t *testing.T, clock sluice.Clock) *sluice.Limiter {
		s, err := memory.New(memory.WithClock(clock))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return sluice.New(s, sluice.WithClock(clock))
	}},
	{"redis", func(t *testing.T, clock sluice.Clock) *sluice.Limiter {
		return openRedis(t, "redis://"+testenv.RedisAddr(t), clock)
	}},
}

// openRedis opens a Redis store at url under a key prefix of the test's own, deciding on the
// client's clock.
func openRedis(t *testing.T, url string, clock sluice.Clock) *sluice.Limiter {
	prefix := "httplimit-test:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	s, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: url, Clock: clock, Prefix: prefix, Timeout: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	return sluice.New(s, sluice.WithClock(clock))
}

// eachBackend runs f on every backend with a manual clock at t0.
func eachBackend(t *testing.T, f func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			f(t, b.open(t, clock), clock)
		})
	}
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })

// get sends one request to h and returns the recorded response; edit prepares the request.
func get(h http.Handler, target string, edit func(r *http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if edit != nil {
		edit(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func from(addr string) func(r *http.Request) { return func(r *http.Request) { r.RemoteAddr = addr } }

// statuses sends n requests prepared by edit and returns their status codes.
func statuses(h http.Handler, n int, target string, edit func(r *http.Request)) []int {
	var out []int
	for range n {
		out = append(out, get(h, target, edit).Code)
	}
	return out
}

func codes(c ...int) []int { return c }

// quietLogger discards records; logged returns a logger writing JSON into buf.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func logged(buf *testenv.LogBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, nil))
}

func mustNew(t *testing.T, l *sluice.Limiter, opts ...Option) func(http.Handler) http.Handler {
	t.Helper()
	mw, err := New(l, append([]Option{WithLogger(quietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func contextWithCancel(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithCancel(r.Context())
}

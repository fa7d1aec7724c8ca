package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

var (
	modes     = []string{"", "sync", "overlimit", "async"}
	fallbacks = []string{"", "local", "fail_open", "fail_closed"}
)

// TestOpenEveryScheme: every supported store URL opens (Redis clients connect lazily, so no
// server is needed to parse them) as the store of its scheme, and closes.
func TestOpenEveryScheme(t *testing.T) {
	for _, tc := range []struct {
		url, scheme string
		redis       bool
	}{
		{"", "memory", false},
		{"memory", "memory", false},
		{"memory://", "memory", false},
		{"redis://127.0.0.1:1", "redis", true},
		{"redis://user:secret@127.0.0.1:1/3?dial_timeout=50ms&pool_size=4", "redis", true},
		{"rediss://127.0.0.1:1/0", "rediss", true},
		{"redis-cluster://127.0.0.1:1", "redis-cluster", true},
		{"redis-cluster://127.0.0.1:1,127.0.0.1:2,localhost:3?dial_timeout=50ms", "redis-cluster", true},
		{"redis-sentinel://127.0.0.1:1/mymaster", "redis-sentinel", true},
		{"redis-sentinel://u:p@127.0.0.1:1,127.0.0.1:2/mymaster?password=data&db=2", "redis-sentinel", true},
	} {
		if scheme, err := store.Scheme(tc.url); err != nil || scheme != tc.scheme {
			t.Errorf("Scheme(%q) = %q, %v; want %q", tc.url, scheme, err, tc.scheme)
		}
		st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: tc.url}})
		if err != nil {
			t.Errorf("%q: %v", tc.url, err)
			continue
		}
		switch st.(type) {
		case *memory.Store:
			if tc.redis {
				t.Errorf("%q: opened a memory store", tc.url)
			}
		case *redis.Store:
			if !tc.redis {
				t.Errorf("%q: opened a Redis store", tc.url)
			}
		default:
			t.Errorf("%q: opened %T", tc.url, st)
		}
		if err := closer.Close(); err != nil {
			t.Errorf("%q: Close: %v", tc.url, err)
		}
	}
}

// TestOpenBadURL: a bad URL is an error naming what is wrong, before anything opens; an
// unknown scheme lists the known ones.
func TestOpenBadURL(t *testing.T) {
	for _, tc := range []struct{ url, names string }{
		{"nosuch://x", `url: scheme: unknown "nosuch" (want memory, redis, rediss, redis-cluster, redis-sentinel or memcached)`},
		{"http://127.0.0.1:6379", "scheme"},
		{"127.0.0.1:6379", "url: scheme: missing"},
		{"Memory", "url: scheme: missing"},
		{"memory://x", "memory://"},
		{"redis://", "host"},
		{"redis://127.0.0.1", "host"},
		{"redis://127.0.0.1:6379/x", "path"},
		{"redis://127.0.0.1:6379?colour=red", "unknown query parameter"},
		{"redis://127.0.0.1:6379?dial_timeout=soon", "dial_timeout"},
		{"redis-cluster://127.0.0.1:1,127.0.0.1:2/3", "path"},
		{"redis-cluster://127.0.0.1:1,nohostport", "host"},
		{"redis-sentinel://127.0.0.1:1,127.0.0.1:2", "path"},
		{"redis-sentinel://127.0.0.1:1/a/b", "path"},
		{"memcached://", "memcached: url"},
		{"memcached://127.0.0.1:11211/0", "memcached: url"},
		{"memcached://127.0.0.1:11211?timeout=1s", "memcached: url"},
		{"memcached://127.0.0.1", "not host:port"},
	} {
		st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: tc.url}})
		if err == nil {
			closer.Close()
			t.Errorf("%q: opened %T, want an error", tc.url, st)
			continue
		}
		if st != nil || closer != nil {
			t.Errorf("%q: an error with a store %v or closer %v", tc.url, st, closer)
		}
		if !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%q: %v does not name %s", tc.url, err, tc.names)
		}
	}
}

// TestOpenValidatesFirst: a bad field is an error naming it, before anything opens (a Redis
// that does not answer would otherwise fail the Ping); Validate reports every bad field.
func TestOpenValidatesFirst(t *testing.T) {
	down := "redis://127.0.0.1:1?dial_timeout=50ms"
	for _, tc := range []struct {
		cfg   store.Config
		names string
	}{
		{store.Config{Decorators: store.Decorators{Mode: "psychic"}}, `store: mode: unknown distribution mode "psychic" (want sync, overlimit or async)`},
		{store.Config{Backend: store.Backend{URL: down}, Decorators: store.Decorators{Mode: "Sync"}}, "store: mode: "},
		{store.Config{Backend: store.Backend{URL: down}, Decorators: store.Decorators{Mode: "over_limit"}}, "store: mode: "},
		{store.Config{Decorators: store.Decorators{Fallback: "pray"}}, `store: fallback: unknown fallback policy "pray"`},
		{store.Config{Backend: store.Backend{URL: down}, Decorators: store.Decorators{Fallback: "open"}}, "store: fallback: "},
		{store.Config{Backend: store.Backend{URL: down}, Decorators: store.Decorators{Fallback: "none"}}, "store: fallback: "},
		{store.Config{Backend: store.Backend{URL: down, Timeout: -time.Second}}, "store: timeout: must not be negative, got -1s"},
		{store.Config{Backend: store.Backend{URL: "memcache://127.0.0.1:1"}}, "store: url: scheme: "},
	} {
		tc.cfg.Ping = true
		_, _, err := store.Open(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.names) || strings.Contains(err.Error(), "ping") {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.names)
		}
		if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("%+v: Validate: %v, want %v", tc.cfg, verr, err)
		}
	}
	err := store.Config{Backend: store.Backend{URL: "x://", Timeout: -1}, Decorators: store.Decorators{Mode: "m", Fallback: "f"}}.Validate()
	for _, field := range []string{"url: scheme", "mode", "fallback", "timeout"} {
		if err == nil || !strings.Contains(err.Error(), "store: "+field+": ") {
			t.Errorf("Validate: %v does not name %s", err, field)
		}
	}
	for _, mode := range modes {
		for _, fb := range fallbacks {
			if err := (store.Config{Backend: store.Backend{URL: down}, Decorators: store.Decorators{Mode: mode, Fallback: fb}}).Validate(); err != nil {
				t.Errorf("mode %q fallback %q: %v", mode, fb, err)
			}
		}
	}
}

// TestCheckModeAndFallback: the checks the CLI prefixes with its flag names accept what Open
// accepts and do not name a field themselves.
func TestCheckModeAndFallback(t *testing.T) {
	for _, m := range modes {
		if err := store.CheckMode(m); err != nil {
			t.Errorf("CheckMode(%q): %v", m, err)
		}
	}
	for _, p := range fallbacks {
		if err := store.CheckFallback(p); err != nil {
			t.Errorf("CheckFallback(%q): %v", p, err)
		}
	}
	for _, err := range []error{store.CheckMode("SYNC"), store.CheckFallback("local ")} {
		if err == nil || !strings.HasPrefix(err.Error(), "unknown ") {
			t.Errorf("%v, want an error starting with unknown", err)
		}
	}
}

// TestOpenModesAndFallbacks: every mode and fallback composes the decorators in order
// (fallback outermost), all on Config.Clock, and decides exactly on one instance.
func TestOpenModesAndFallbacks(t *testing.T) {
	ctx := context.Background()
	rule := sluice.FixedWindow(3, time.Minute)
	for _, mode := range modes {
		for _, fb := range fallbacks {
			name := fmt.Sprintf("mode %q fallback %q", mode, fb)
			clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			st, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{Clock: clock}, Decorators: store.Decorators{Mode: mode, Fallback: fb}})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got, want := fmt.Sprintf("%T", st), outermost(mode, fb); got != want {
				t.Errorf("%s: opened %s, want %s", name, got, want)
			}
			lim := sluice.New(st)
			for round := range 2 {
				for i := range 4 {
					d, err := lim.Allow(ctx, "k", rule)
					if err != nil || d.Allowed != (i < 3) {
						t.Errorf("%s: round %d, request %d: %+v, %v", name, round, i, d, err)
					}
				}
				clock.Advance(time.Minute) // the store and every decorator see the next window
			}
			if err := closer.Close(); err != nil {
				t.Errorf("%s: Close: %v", name, err)
			}
		}
	}
}

func outermost(mode, fallback string) string {
	switch {
	case fallback != "":
		return fmt.Sprintf("%T", &distributed.Fallback{})
	case mode == "overlimit":
		return fmt.Sprintf("%T", &distributed.OverLimit{})
	case mode == "async":
		return fmt.Sprintf("%T", &distributed.Async{})
	}
	return fmt.Sprintf("%T", &memory.Store{})
}

// TestOpenPing: Ping makes a store that does not answer an error wrapping
// sluice.ErrStoreUnavailable; without it the client connects on first use.
func TestOpenPing(t *testing.T) {
	down := store.Config{Backend: store.Backend{URL: "redis://127.0.0.1:1?dial_timeout=50ms"}}
	_, closer, err := store.Open(context.Background(), down)
	if err != nil {
		t.Fatalf("without Ping: %v", err)
	}
	closer.Close()
	down.Ping, down.Mode, down.Fallback = true, "async", "local"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := store.Open(ctx, down); !errors.Is(err, sluice.ErrStoreUnavailable) || !strings.HasPrefix(err.Error(), "store: ping: ") {
		t.Errorf("Ping on a closed port: %v", err)
	}
	if _, closer, err := store.Open(ctx, store.Config{Backend: store.Backend{Ping: true}}); err != nil {
		t.Errorf("Ping on memory: %v", err)
	} else {
		closer.Close()
	}
}

// TestOpenFallbackHooks: OnCircuitChange and OnStoreError reach the fallback Open composes: on
// a closed port every decision is answered by the policy, the failures are reported, and the
// circuit's opening is seen.
func TestOpenFallbackHooks(t *testing.T) {
	var (
		mu      sync.Mutex
		errs    []error
		changes []string
	)
	st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: "redis://127.0.0.1:1?dial_timeout=50ms", Timeout: time.Second}, Decorators: store.Decorators{Fallback: "fail_closed", OnCircuitChange: func(from, to distributed.Circuit) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, from.String()+">"+to.String())
	}, OnStoreError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	for range 3 {
		d, err := st.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(3, time.Minute), N: 1})
		if err != nil || d.Allowed {
			t.Fatalf("fail_closed on a closed port: %+v, %v; want a denial", d, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The first heartbeat failed, then the first decision, which opened the circuit (the
	// others were decided without a store call).
	if len(errs) < 2 || !strings.HasPrefix(errs[0].Error(), "distributed: heartbeat: ") || !sluice.IsUnavailable(errs[len(errs)-1]) {
		t.Errorf("store errors reported: %q, want the heartbeat's and a decision's (unavailable)", errs)
	}
	if len(changes) != 1 || changes[0] != "store>fallback" {
		t.Errorf("circuit changes: %v, want [store>fallback]", changes)
	}
}

// TestOpenFallbackTimeout: with a Fallback, the Timeout set is the fallback's too. A Redis
// that accepts connections and never answers (a listener nobody reads) is decided by the
// fail_open policy only once the configured 150 ms have passed, not after the fallback's
// shorter default (50 ms), which would cut calls the operator allowed to take longer.
func TestOpenFallbackTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const timeout = 150 * time.Millisecond
	st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: "redis://" + l.Addr().String(), Timeout: timeout}, Decorators: store.Decorators{Fallback: "fail_open"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	start := time.Now()
	d, err := st.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.FixedWindow(3, time.Minute), N: 1})
	took := time.Since(start)
	if err != nil || !d.Allowed {
		t.Fatalf("fail_open on a silent Redis: %+v, %v; want an admission", d, err)
	}
	if took < timeout-10*time.Millisecond {
		t.Errorf("decided by the policy after %v, want no sooner than the configured %v", took, timeout)
	}
}

// TestOpenMemoryMaxBytes: Config.MemoryMaxBytes reaches the memory store (sluice serve
// --memory-max-bytes), and a negative one is refused.
func TestOpenMemoryMaxBytes(t *testing.T) {
	st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{MemoryMaxBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	mem, ok := st.(*memory.Store)
	if !ok {
		t.Fatalf("Open(memory) returned %T", st)
	}
	for i := range 200 {
		if _, err := st.Take(context.Background(), sluice.Request{Key: "k" + strconv.Itoa(i), Rule: sluice.SlidingLog(1000, time.Minute), N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if mem.Bytes() > 1<<20 {
		t.Errorf("%d bytes charged, budget %d", mem.Bytes(), 1<<20)
	}
	if _, _, err := store.Open(context.Background(), store.Config{Backend: store.Backend{MemoryMaxBytes: -1}}); err == nil || !strings.Contains(err.Error(), "memory max bytes") {
		t.Errorf("MemoryMaxBytes -1: %v", err)
	}
}

// FuzzOpenErrorHidesPassword (issue 31, item 3): whatever bytes a password holds — raw '#',
// '/', '?', '@', '%', spaces — in a store URL of any scheme, the error opening it (a URL that
// does not parse, a host that is not host:port, a bad path) never quotes it; url.Parse's own
// error did, and so did the errors naming the URL's parts.
func FuzzOpenErrorHidesPassword(f *testing.F) {
	for _, pw := range []string{"pa#ss-word", "pa/ss-word", "pa?ss-word", "pa ss-word", "p@ss%zz-word", "a:b/c@d"} {
		f.Add(pw, uint8(0))
		f.Add(pw, uint8(3))
	}
	schemes := []string{"redis", "rediss", "redis-sentinel", "redis-cluster", "memcached", "nosuch"}
	f.Fuzz(func(t *testing.T, password string, scheme uint8) {
		if len(password) < 6 || strings.Trim(password, "x:@/?#&=%,.") == "" {
			return
		}
		raw := schemes[int(scheme)%len(schemes)] + "://user:" + password + "@127.0.0.1:1/m"
		if strings.Count(raw, password) != 1 {
			return
		}
		st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: raw}})
		if err == nil {
			_ = closer.Close()
			_ = st
			return
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("Open(%q): %v quotes the password", raw, err)
		}
	})
}

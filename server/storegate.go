package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/store"
)

// The store gate (issue 30): a server whose shared store has never answered — a Redis whose
// CA is not trusted, a wrong password, nothing listening — can decide nothing, and must not
// take traffic: envoyproxy/ratelimit does not even listen until Redis answers. Until the
// store has answered one probe, /healthcheck and /readyz answer 503 and the gRPC health
// services NOT_SERVING, and the reason is logged every storeGateLogEvery, naming the store
// (its URL masked) and the error (the TLS error itself). From then on health follows
// Config.HealthcheckStore as before. The gate holds only a store the engine opens from a URL
// that is shared (not the in-process memory store) and has no fallback: a fallback decides
// while the store is down, as its operator chose, and /readyz says "degraded".

// storeGateEvery is how often a closed gate probes the store; storeGateLogEvery how often it
// says why it is closed.
const (
	storeGateEvery    = time.Second
	storeGateLogEvery = 5 * time.Second
)

// storeGate is open once the store has answered. The zero value is closed; newStoreGate
// returns an open one for the servers it does not hold.
type storeGate struct {
	name   string        // the store, masked, for the log
	opened chan struct{} // closed once open
	once   sync.Once
	mu     sync.Mutex
	why    string // the last probe's error
	log    logthrottle.Throttle
}

// newStoreGate returns the gate of cfg's store: open at once unless the engine opens a shared
// store without a fallback.
func newStoreGate(cfg *Config) *storeGate {
	g := &storeGate{opened: make(chan struct{}), log: logthrottle.Throttle{Interval: storeGateLogEvery}}
	sc := cfg.StoreConfig
	scheme, err := store.Scheme(sc.URL)
	if cfg.Store != nil || err != nil || scheme == "memory" || sc.Fallback != "" {
		g.open()
		return g
	}
	g.name = store.Redact(sc.URL)
	return g
}

func (g *storeGate) open() { g.once.Do(func() { close(g.opened) }) }

// isOpen reports whether the store has answered.
func (g *storeGate) isOpen() bool {
	select {
	case <-g.opened:
		return true
	default:
		return false
	}
}

// reason is why the gate is closed ("" when open), for /readyz and /healthcheck.
func (g *storeGate) reason() string {
	if g.isOpen() {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	why := "the store " + g.name + " has not answered yet"
	if g.why != "" {
		why += ": " + g.why
	}
	return why
}

// probe asks the store once; true when it answered (and the gate is now open).
func (g *storeGate) probe(ctx context.Context, ask func(context.Context) error, log *slog.Logger, since time.Time) bool {
	if g.isOpen() {
		return true
	}
	err := ask(ctx)
	g.mu.Lock()
	failed := g.why != ""
	if err != nil && ctx.Err() == nil {
		g.why = err.Error()
	}
	g.mu.Unlock()
	if err == nil {
		if failed { // it was said to be unreachable: say it answers now
			log.Info("store answered: ready", "store", g.name, "after", time.Since(since).Round(time.Millisecond))
		}
		g.open()
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	g.log.Log(ctx, log, time.Now(), slog.LevelWarn,
		"store unreachable: not ready until it answers (/healthcheck and /readyz 503, gRPC health NOT_SERVING); decisions fail meanwhile",
		slog.String("store", g.name), slog.String("err", err.Error()), slog.Duration("since", time.Since(since).Round(time.Second)))
	return false
}

// run probes every storeGateEvery until the store answers or ctx ends.
func (g *storeGate) run(ctx context.Context, ask func(context.Context) error, log *slog.Logger, since time.Time) {
	t := time.NewTicker(storeGateEvery)
	defer t.Stop()
	for !g.probe(ctx, ask, log, since) {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

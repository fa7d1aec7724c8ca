package rls

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store"
)

// fallbackWatch follows the fallback of the store the engine opened (StoreConfig.Fallback):
// it logs each change of state with the policy and the cause, tells the Observer of each
// change and of each store failure the fallback absorbs, and keeps the state and the time
// spent in it for Engine.Fallback, the live view and /readyz. It is safe for concurrent use.
type fallbackWatch struct {
	policy string
	log    *slog.Logger
	clock  sluice.Clock
	obs    Observer

	mu    sync.Mutex
	state distributed.Circuit
	since time.Time     // of the last change, or of the start
	spent time.Duration // in the fallback state before since
	cause string        // the last store error: the cause of a switch to the fallback
}

// watchFallback hooks w into c, keeping the hooks the caller set. storeErr is called with
// each failure the fallback absorbs.
func watchFallback(c *store.Config, policy string, log *slog.Logger, clock sluice.Clock, obs Observer, storeErr func(error)) *fallbackWatch {
	w := &fallbackWatch{policy: policy, log: log, clock: clock, obs: obs, state: distributed.CircuitClosed, since: clock.Now()}
	userChange, userErr := c.OnCircuitChange, c.OnStoreError
	c.OnCircuitChange = func(from, to distributed.Circuit) {
		w.change(to)
		if userChange != nil {
			userChange(from, to)
		}
	}
	c.OnStoreError = func(err error) {
		w.setCause(err)
		storeErr(err)
		if userErr != nil {
			userErr(err)
		}
	}
	return w
}

// FallbackView is the state of the fallback of the store the engine opened.
type FallbackView struct {
	// Policy is StoreConfig.Fallback; Circuit the circuit decisions are in (CircuitOpen: the
	// fallback decides); InFallback the time spent deciding by the policy since the start,
	// the current stretch included.
	Policy     string
	Circuit    distributed.Circuit
	InFallback time.Duration
}

// Fallback returns the state of the fallback of the store the engine opened
// (StoreConfig.Fallback); false without one (or for a Store passed in Config).
func (e *Engine) Fallback() (FallbackView, bool) {
	w := e.fallback
	if w == nil {
		return FallbackView{}, false
	}
	return FallbackView{Policy: w.policy, Circuit: w.circuit(), InFallback: w.fallbackTime()}, true
}

// circuit returns the fallback's state.
func (w *fallbackWatch) circuit() distributed.Circuit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

func (w *fallbackWatch) setCause(err error) {
	w.mu.Lock()
	w.cause = err.Error()
	w.mu.Unlock()
}

// change records and logs a change of state.
func (w *fallbackWatch) change(to distributed.Circuit) {
	now := w.clock.Now()
	w.mu.Lock()
	if to == w.state {
		w.mu.Unlock()
		return
	}
	was := now.Sub(w.since)
	if w.state == distributed.CircuitOpen {
		w.spent += was
	}
	w.state, w.since = to, now
	cause := w.cause
	w.mu.Unlock()
	w.obs.CircuitChanged(to)
	if to == distributed.CircuitOpen {
		w.log.Error("store unavailable: deciding by the fallback policy until it answers a probe",
			"policy", w.policy, "cause", cause)
		return
	}
	w.log.Info("store answered a probe: decisions are the store's again", "policy", w.policy,
		"fallback_for", was.Round(time.Millisecond))
}

// fallbackTime returns the time spent in the fallback state, the current stretch included.
func (w *fallbackWatch) fallbackTime() time.Duration {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == distributed.CircuitOpen {
		return w.spent + now.Sub(w.since)
	}
	return w.spent
}

// degraded describes the fallback state for /readyz, or returns "" in the store state.
func (w *fallbackWatch) degraded() string {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != distributed.CircuitOpen {
		return ""
	}
	return fmt.Sprintf("store unavailable for %v, deciding by the fallback policy %s (cause: %s)",
		now.Sub(w.since).Round(time.Millisecond), w.policy, w.cause)
}

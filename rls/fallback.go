package rls

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/store"
)

// fallbackWatch follows the fallback of the store the server opened (StoreConfig.Fallback):
// it logs each change of state with the policy and the cause, counts the store failures
// the fallback absorbs, and keeps the state and the time spent in it for the metrics and
// /readyz. It is safe for concurrent use.
type fallbackWatch struct {
	policy string
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	state distributed.Circuit
	since time.Time     // of the last change, or of the start
	spent time.Duration // in the fallback state before since
	cause string        // the last store error: the cause of a switch to the fallback

	changes *prometheus.CounterVec // to
}

// watchFallback hooks w into c (keeping hooks the caller set) and registers its metrics:
// sluice_store_state, sluice_store_state_changes_total and sluice_fallback_seconds_total.
// storeErr is called with each failure the fallback absorbs.
func watchFallback(c *store.Config, policy string, log *slog.Logger, reg prometheus.Registerer, storeErr func(error)) (*fallbackWatch, error) {
	w := &fallbackWatch{policy: policy, log: log, now: time.Now, state: distributed.CircuitClosed, since: time.Now(),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_store_state_changes_total",
			Help: "Changes of the fallback's state, by the state entered (fallback: the store failed; store: it answered a probe)."},
			[]string{"to"})}
	cols := []prometheus.Collector{w.changes,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_fallback_seconds_total",
			Help: "Time spent deciding by the fallback policy because the store was unavailable."},
			func() float64 { return w.fallbackTime().Seconds() })}
	for _, st := range []distributed.Circuit{distributed.CircuitClosed, distributed.CircuitOpen} {
		cols = append(cols, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_store_state",
			Help:        "1 for the state decisions are in: store (the store decides) or fallback (the fallback policy decides; the store is unavailable).",
			ConstLabels: prometheus.Labels{"state": st.String(), "policy": policy}},
			func() float64 { return b2f(w.State() == st) }))
	}
	for _, col := range cols {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	w.changes.WithLabelValues(distributed.CircuitOpen.String())
	w.changes.WithLabelValues(distributed.CircuitClosed.String())
	userChange, userErr := c.OnStateChange, c.OnStoreError
	c.OnStateChange = func(from, to distributed.Circuit) {
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
	return w, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// State returns the fallback's state.
func (w *fallbackWatch) State() distributed.Circuit {
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
	now := w.now()
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
	w.changes.WithLabelValues(to.String()).Inc()
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
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == distributed.CircuitOpen {
		return w.spent + now.Sub(w.since)
	}
	return w.spent
}

// degraded describes the fallback state for /readyz, or returns "" in the store state.
func (w *fallbackWatch) degraded() string {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != distributed.CircuitOpen {
		return ""
	}
	return fmt.Sprintf("store unavailable for %v, deciding by the fallback policy %s (cause: %s)",
		now.Sub(w.since).Round(time.Millisecond), w.policy, w.cause)
}

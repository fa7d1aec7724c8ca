package httplimit

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/inflight"
)

// rated reports whether p has a rate limit (a Limit with InFlight alone has none).
func rated(p *Limit) bool { return p.InFlight == nil || p.Rule != (sluice.Rule{}) }

// validateInFlight checks p's in-flight limit, if any.
func validateInFlight(p *Limit) error { return inflight.Validate(p.InFlight, p.Adaptive, p.Hot != nil) }

// checkLeaser leaves out the in-flight limits when the limiter's store keeps no leases,
// returning the error that says so, and otherwise makes the Leases that hold their slots
// when WithLeases gave none.
func (m *middleware) checkLeaser() error {
	if m.l == nil {
		return nil
	}
	if m.leases != nil || inflight.Leases(m.l.Store()) {
		if m.leases == nil && hasInFlight(m.limits) {
			m.leases = sluice.NewLeases(m.l.Store(), sluice.WithClock(m.clock))
		}
		if m.fallback != nil && hasInFlight(m.limits) {
			m.fbLeases = sluice.NewLeases(m.fallback.Store(), sluice.WithClock(m.clock))
		}
		return nil
	}
	kept := m.limits[:0:0]
	var names []string
	for _, p := range m.limits {
		if p.InFlight != nil {
			names = append(names, p.Name)
			continue
		}
		kept = append(kept, p)
	}
	if names == nil {
		return nil
	}
	m.limits = kept
	return fmt.Errorf("httplimit: policies %v: in_flight: %w (the limiter's store is not a sluice.Leaser)", names, sluice.ErrNoLeaser)
}

func hasInFlight(limits []Limit) bool {
	for _, p := range limits {
		if p.InFlight != nil {
			return true
		}
	}
	return false
}

// claim adds p's in-flight claim to q under key, for a request of class c.
func (q *request) claim(p *Limit, key string, c sluice.Criticality) {
	q.claims = append(q.claims, inflight.Claim{Name: p.Name, Key: key, Limit: *p.InFlight, Adaptive: p.Adaptive,
		Classed: p.Shares != nil, Class: c})
}

// acquire takes the slots of q's claims, and reports whether the request may run. It answers
// a refusal (429, or 503 for an adaptive limit) and a store failure by the failure policy.
func (h *handler) acquire(w http.ResponseWriter, r *http.Request, q *request) bool {
	m := h.m
	i, err := inflight.Acquire(r.Context(), m.leases, q.claims)
	if err != nil {
		if m.stats != nil {
			m.stats.StoreErrors.Add(1)
		}
		m.warn(&m.storeLog, "httplimit: the store could not take an in-flight slot; applying the failure policy",
			slog.String("failure", m.failure.String()), slog.Any("err", err))
		switch m.failure {
		case distributed.FailClosed:
			if m.stats != nil {
				m.stats.FailedClosed.Add(1)
			}
			WriteUnavailable(w, r, "The rate limiter cannot decide right now.", []string{q.claims[i].Name})
			return false
		case distributed.FailLocal:
			i, err = inflight.Acquire(r.Context(), m.fbLeases, q.claims)
		}
		if err != nil || m.failure == distributed.FailOpen {
			if m.stats != nil {
				m.stats.FailedOpen.Add(1)
			}
			return true
		}
	}
	if i < 0 {
		return true
	}
	if m.stats != nil {
		m.stats.Denied.Add(1)
	}
	c := &q.claims[i]
	if m.deny != nil && !c.Overload() {
		m.deny(w, r, append(q.results, Result{Name: c.Name, Decision: c.Decision()}))
		return false
	}
	WriteRefused(w, r, q.results, Result{Name: c.Name, Decision: c.Decision()}, c.Overload())
	return false
}

// WriteRefused answers a request refused a slot of the in-flight limit named refused.Name:
// with overload (an adaptive limit: the service is overloaded), 503 with Retry-After 1 and a
// temporary-reduced-capacity problem; otherwise (the client's key is at its limit) the 429 of
// WriteDenial, for results (the request's rate-limit results, all allowed) and refused.
// The rate-limit headers, if any, are set first. Transports that enforce in-flight limits
// (httplimit, sluice proxy) answer with it.
func WriteRefused(w http.ResponseWriter, r *http.Request, results []Result, refused Result, overload bool) {
	if overload {
		WriteUnavailable(w, r, "The service is at its concurrency limit, which follows its latency.", []string{refused.Name})
		return
	}
	WriteDenial(w, r, append(results, refused))
}

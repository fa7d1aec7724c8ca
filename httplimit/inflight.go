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
func validateInFlight(p *Limit) error {
	switch {
	case p.InFlight == nil && p.Adaptive != nil:
		return &sluice.FieldError{Field: "adaptive", Reason: "set without InFlight (which gives its lease)", Err: sluice.ErrInvalidRule}
	case p.InFlight == nil:
		return nil
	case p.Hot != nil:
		return &sluice.FieldError{Field: "hot", Reason: "a hot parameter cannot have an in-flight limit", Err: sluice.ErrInvalidRule}
	}
	f := *p.InFlight
	if p.Adaptive != nil {
		f.Limit = 1 // the adaptive limit is in force; InFlight gives the lease
	}
	return f.Validate()
}

// checkLeaser leaves out the in-flight limits when the limiter's store keeps no leases,
// returning the error that says so.
func (m *middleware) checkLeaser() error {
	if m.l == nil {
		return nil
	}
	if _, ok := m.l.Store().(sluice.Leaser); ok {
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

// claim adds p's in-flight claim to q under key, for a request of class c.
func (q *request) claim(p *Limit, key string, c sluice.Criticality) {
	q.claims = append(q.claims, inflight.Claim{Name: p.Name, Key: key, Limit: *p.InFlight, Adaptive: p.Adaptive,
		Classed: p.Shares != nil, Class: c})
}

// acquire takes the slots of q's claims, and reports whether the request may run. It answers
// a refusal (429, or 503 for an adaptive limit) and a store failure by the failure policy.
func (h *handler) acquire(w http.ResponseWriter, r *http.Request, q *request) bool {
	m := h.m
	i, err := inflight.Acquire(r.Context(), m.l, q.claims)
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
			i, err = inflight.Acquire(r.Context(), m.fallback, q.claims)
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
	if c.Overload() {
		WriteUnavailable(w, r, "The service is at its concurrency limit, which follows its latency.", []string{c.Name})
		return false
	}
	q.results = append(q.results, Result{Name: c.Name, Decision: c.Decision()})
	if m.deny != nil {
		m.deny(w, r, q.results)
	} else {
		WriteDenial(w, r, q.results)
	}
	return false
}

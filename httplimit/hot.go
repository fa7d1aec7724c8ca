package httplimit

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
)

// KeyQuery counts requests by the first value of a query parameter, such as a product id: a
// parameter limited per value, usually with Policy.Hot. A request without it (or with an empty
// one) is not counted by the policy.
func KeyQuery(name string) Key {
	return KeyFunc(func(r *http.Request) (string, bool) {
		v := r.URL.Query().Get(name)
		return v, v != ""
	})
}

// buildHot builds the hot-parameter sketch of each policy with Policy.Hot (nil for others).
func (m *middleware) buildHot() error {
	m.hot = make([]*hotkey.Param, len(m.policies))
	for i, p := range m.policies {
		if p.Hot == nil {
			continue
		}
		cfg := *p.Hot
		if cfg.Clock == nil {
			cfg.Clock = m.clock
		}
		hp, err := hotkey.New(p.Rule, cfg)
		if err != nil {
			return err
		}
		m.hot[i] = hp
	}
	return nil
}

// observeHot counts the request's key under policy i's sketch and reports whether it is
// admitted cold, with no store call; otherwise the check is charged first (see settleHot).
func (m *middleware) observeHot(q *request, i int, key []byte, n int64) (cold bool) {
	v := m.hot[i].Observe(string(key), n)
	if v.Cold {
		return true
	}
	for len(q.charges) < len(q.checks) {
		q.charges = append(q.charges, 0)
	}
	q.charges = append(q.charges, v.Charge)
	return false
}

// allowAll decides q's checks on l (sluice.Limiter.AllowAll), first charging the cold
// admissions of its hot keys, then telling their sketches which the store denied.
func (m *middleware) allowAll(ctx context.Context, l *sluice.Limiter, q *request) (sluice.Decision, error) {
	if len(q.charges) == 0 {
		return l.AllowAll(ctx, q.checks)
	}
	if err := m.settleHot(ctx, l, q); err != nil {
		return sluice.Decision{}, err
	}
	d, err := l.AllowAll(ctx, q.checks)
	if err == nil {
		m.recordHot(q)
	}
	return d, err
}

// settleHot charges the store with the cold admissions of the request's hot keys before it
// decides.
func (m *middleware) settleHot(ctx context.Context, l *sluice.Limiter, q *request) error {
	for i, c := range q.charges {
		if c > 0 {
			if _, err := l.Settle(ctx, q.checks[i].Key, q.checks[i].Rule, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordHot tells the sketches which hot keys the store denied.
func (m *middleware) recordHot(q *request) {
	for i := range q.checks {
		if hp := m.hot[q.which[i]]; hp != nil && !q.checks[i].Decision.Allowed {
			hp.Tracker().Denied(q.checks[i].Key)
		}
	}
}

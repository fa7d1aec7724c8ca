package proxy

import (
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/rls"
)

// appendClaims appends the in-flight claims of the verdicts of one domain's answer: every
// descriptor whose limit has a max_in_flight (shadow-mode limits take no slot).
func appendClaims(claims []inflight.Claim, vs []rls.Verdict) []inflight.Claim {
	for i := range vs {
		v := &vs[i]
		if v.Key == "" || v.Limit == nil || v.Limit.InFlight == nil || v.Limit.ShadowMode {
			continue
		}
		claims = append(claims, inflight.Claim{Name: v.Limit.Name, Key: v.Key, Limit: v.Limit.InFlight.InFlight, Adaptive: v.Adaptive})
	}
	return claims
}

// acquire takes the slots of sc's claims for r and reports whether r may be forwarded;
// otherwise it has answered: 429 or 503 (an adaptive limit) as httplimit.WriteRefused, or as
// refuse does for a store that failed.
func (p *Proxy) acquire(w http.ResponseWriter, r *http.Request, sc *scratch) bool {
	i, err := inflight.Acquire(r.Context(), p.eng.Limiter(), sc.claims)
	if err != nil {
		p.refuse(w, r, p.eng.StoreError(r.Context(), err))
		return false
	}
	if i < 0 {
		return true
	}
	c := &sc.claims[i]
	p.metrics.denied.Inc()
	httplimit.WriteRefused(w, r, sc.results, httplimit.Result{Name: c.Name, Decision: c.Decision()}, c.Overload())
	return false
}

// checkLeaser refuses rules with a max_in_flight over a store that keeps no leases.
func checkLeaser(c *config.Config, st sluice.Store) error {
	if _, ok := st.(sluice.Leaser); ok || c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		if l.InFlight != nil {
			return fmt.Errorf("proxy: rules: %s:%d: %s has a max_in_flight, but the store keeps no leases: %w", l.File, l.Line, l.FullKey, sluice.ErrNoLeaser)
		}
	}
	return nil
}

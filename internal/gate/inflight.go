package gate

import (
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
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
		claims = append(claims, inflight.Claim{Name: v.Limit.Name, Key: v.Key, InFlight: v.Limit.InFlight.InFlight, Adaptive: v.Adaptive})
	}
	return claims
}

// CheckLeaser refuses rules with a max_in_flight over a store that keeps no leases.
func CheckLeaser(c *config.Config, st sluice.Store) error {
	if _, ok := st.(sluice.Leaser); ok || c == nil {
		return nil
	}
	for _, l := range c.Limits() {
		if l.InFlight != nil {
			return fmt.Errorf("rules: %s:%d: %s has a max_in_flight, but the store keeps no leases: %w", l.File, l.Line, l.FullKey, sluice.ErrNoLeaser)
		}
	}
	return nil
}

package server

import (
	"sync/atomic"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// currentLimits are the RLS current_limit messages of every rule of every limit of one rules
// config, each limit's built at its first answer and shared read-only by responses, so that
// a rules set of many limits costs nothing here until they are used.
type currentLimits struct {
	cfg    *config.Config
	limits []atomic.Pointer[[]*rlsv3.RateLimitResponse_RateLimit] // by config.Limit.Index, then rule
}

func newCurrentLimits(cfg *config.Config) *currentLimits {
	return &currentLimits{cfg: cfg, limits: make([]atomic.Pointer[[]*rlsv3.RateLimitResponse_RateLimit], len(cfg.Limits()))}
}

// rules returns the current_limit messages of the rules of limit l, building them once.
func (c *currentLimits) rules(l *config.Limit) []*rlsv3.RateLimitResponse_RateLimit {
	p := &c.limits[l.Index]
	if rl := p.Load(); rl != nil {
		return *rl
	}
	n := len(l.Rules)
	if l.Block {
		n = 1 // one window, whatever the rules
	}
	rl := make([]*rlsv3.RateLimitResponse_RateLimit, n)
	for i := range rl {
		rl[i] = currentLimit(rls.RuleLimit(l, i))
	}
	p.CompareAndSwap(nil, &rl)
	return *p.Load()
}

// currentLimit is the current_limit message of cl.
func currentLimit(cl rls.CurrentLimit) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: cl.RequestsPerUnit, Unit: rlsv3.RateLimitResponse_RateLimit_Unit(cl.Unit), Name: cl.Name}
	if cl.UnitMultiplier > 1 {
		rl.UnitMultiplier = wrapperspb.UInt32(cl.UnitMultiplier)
	}
	return rl
}

// currentLimits returns the current_limit messages of cfg, building them for the first
// request under new rules.
func (s *Server) currentLimits(cfg *config.Config) *currentLimits {
	c := s.current.Load()
	if c == nil || c.cfg != cfg {
		c = newCurrentLimits(cfg)
		s.current.Store(c)
	}
	return c
}

// of is the current_limit of a limited verdict decided under c's rules: its binding rule's,
// or the descriptor's own limit (built per response, as the peer's; c may then be nil).
func (c *currentLimits) of(v *rls.Verdict) *rlsv3.RateLimitResponse_RateLimit {
	if v.Override != nil {
		return currentLimit(v.Current())
	}
	return c.rules(v.Limit)[v.Binding]
}

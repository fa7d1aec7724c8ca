package server

import (
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

// currentLimits are the RLS current_limit messages of every rule of every limit of one rules
// config, built once per config and shared read-only by responses.
type currentLimits struct {
	cfg    *config.Config
	limits [][]*rlsv3.RateLimitResponse_RateLimit // by config.Limit.Index, then rule
}

func newCurrentLimits(cfg *config.Config) *currentLimits {
	c := &currentLimits{cfg: cfg, limits: make([][]*rlsv3.RateLimitResponse_RateLimit, len(cfg.Limits()))}
	for _, l := range cfg.Limits() {
		rules := l.Rules
		if l.Block {
			rules = []sluice.Rule{{Period: l.Unit.Duration() * time.Duration(max(l.UnitMultiplier, 1))}}
		}
		for _, rule := range rules {
			unit, mult := config.UnitOf(rule.Period)
			rl := &rlsv3.RateLimitResponse_RateLimit{
				RequestsPerUnit: uint32(min(max(rule.Limit, 0), math.MaxUint32)),
				Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(unit),
			}
			if l.Name != l.FullKey {
				rl.Name = l.Name
			}
			if mult > 1 {
				rl.UnitMultiplier = wrapperspb.UInt32(mult)
			}
			c.limits[l.Index] = append(c.limits[l.Index], rl)
		}
	}
	return c
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
	if o := v.Override; o != nil {
		rl := &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: o.RequestsPerUnit, Unit: rlsv3.RateLimitResponse_RateLimit_Unit(o.Unit)}
		if o.UnitMultiplier > 1 {
			rl.UnitMultiplier = wrapperspb.UInt32(o.UnitMultiplier)
		}
		return rl
	}
	return c.limits[v.Limit.Index][v.Binding]
}

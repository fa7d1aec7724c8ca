package quota

import (
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
)

// blanket values of an assignment.
const (
	limited int8 = iota
	allowAll
	denyAll
)

// assignment is a bucket's current assignment, immutable once published.
type assignment struct {
	strategy *typev3.RateLimitStrategy
	rule     sluice.Rule
	blanket  int8
	expires  int64 // Unix ns; 0 never
}

// unitDurations are the lengths of typev3.RateLimitUnit values (a month is 30 days, a year
// 365, as the RLS units of package config).
var unitDurations = map[typev3.RateLimitUnit]time.Duration{
	typev3.RateLimitUnit_SECOND: time.Second, typev3.RateLimitUnit_MINUTE: time.Minute,
	typev3.RateLimitUnit_HOUR: time.Hour, typev3.RateLimitUnit_DAY: 24 * time.Hour,
	typev3.RateLimitUnit_MONTH: 30 * 24 * time.Hour, typev3.RateLimitUnit_YEAR: 365 * 24 * time.Hour,
}

// fromStrategy turns a strategy into the local rule (or blanket) that enforces it; ok is
// false for a strategy the client cannot enforce (unknown unit, out-of-range rate), which
// counts as no assignment. A nil strategy allows all, as the protocol says.
func fromStrategy(s *typev3.RateLimitStrategy) (a assignment, ok bool) {
	a.strategy = s
	switch {
	case s == nil || s.Strategy == nil:
		a.blanket = allowAll
	case s.GetTokenBucket() != nil:
		tb := s.GetTokenBucket()
		fill := uint32(1)
		if tb.GetTokensPerFill() != nil {
			fill = tb.GetTokensPerFill().GetValue()
		}
		if tb.GetMaxTokens() == 0 || fill == 0 {
			a.blanket = denyAll
			return a, true
		}
		if tb.GetFillInterval() == nil || tb.GetFillInterval().CheckValid() != nil {
			return a, false
		}
		// Round the fill interval up to whole milliseconds: never faster than assigned.
		iv := tb.GetFillInterval().AsDuration()
		iv = (iv + time.Millisecond - 1) / time.Millisecond * time.Millisecond
		a.rule = sluice.TokenBucket(int64(fill), iv, int64(tb.GetMaxTokens()))
	case s.GetRequestsPerTimeUnit() != nil:
		r := s.GetRequestsPerTimeUnit()
		if r.GetRequestsPerTimeUnit() == 0 {
			a.blanket = denyAll
			return a, true
		}
		d, known := unitDurations[r.GetTimeUnit()]
		if !known || r.GetRequestsPerTimeUnit() > sluice.MaxLimit {
			return a, false
		}
		n := int64(r.GetRequestsPerTimeUnit())
		a.rule = sluice.TokenBucket(n, d, n)
	default:
		if s.GetBlanketRule() == typev3.RateLimitStrategy_DENY_ALL {
			a.blanket = denyAll
		} else {
			a.blanket = allowAll
		}
	}
	if a.blanket == limited && a.rule.Validate() != nil {
		return a, false
	}
	return a, true
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

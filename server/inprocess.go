package server

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// Verdict is the outcome of one descriptor decided in process by Server.Decide.
type Verdict struct {
	// Limit is the configured limit the descriptor matched; nil when none did or when the
	// descriptor brought its own limit.
	Limit *config.Limit
	// Limited reports whether the descriptor was decided by the store: false when no limit
	// matched, or the limit is unlimited or was replaced; Rule and Decision are then zero.
	Limited bool
	// Rule is the binding rule: the one with the least remaining.
	Rule sluice.Rule
	// Decision is the descriptor's decision under its rules (Allowed false when it is over
	// its limit, in shadow mode too).
	Decision sluice.Decision
	// Denied reports whether the descriptor denies the request: over its limit and not in
	// shadow mode.
	Denied bool
}

// Decide answers an RLS request in process, as ShouldRateLimit does (the same validation,
// matching, all-or-nothing decision and metrics), and appends one Verdict per descriptor of
// req to dst. Errors are the gRPC status errors ShouldRateLimit returns: InvalidArgument for a
// request the rules or the bounds refuse, Unavailable when the store fails without a
// fallback, Canceled or DeadlineExceeded when ctx ends. Decide is safe for concurrent use.
func (s *Server) Decide(ctx context.Context, req *rlsv3.RateLimitRequest, dst []Verdict) ([]Verdict, error) {
	_, err := s.decideInto(ctx, req, func(items []item) {
		for i := range items {
			it := &items[i]
			v := Verdict{Limit: it.limit, Limited: it.limited()}
			if v.Limited {
				v.Rule, v.Decision = it.rule(it.binding), it.decision
				v.Denied = it.over && !it.shadow()
			}
			dst = append(dst, v)
		}
	})
	return dst, err
}

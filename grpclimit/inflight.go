package grpclimit

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/inflight"
)

// claim returns l's in-flight claim for a call keyed key.
func (in *Interceptor) claim(ctx context.Context, l *Limit, key string) inflight.Claim {
	c := inflight.Claim{Name: l.Name, Key: key, Limit: *l.InFlight, Adaptive: l.Adaptive}
	if l.Shares != nil {
		c.Classed, c.Class = true, in.class(ctx)
	}
	return c
}

// acquire takes the slots of a call's claims. It returns nil when the call may run (holding
// them, or without them when the store failed and the failure policy lets it through), else
// the status to end the call with.
func (in *Interceptor) acquire(ctx context.Context, claims []inflight.Claim) error {
	i, err := inflight.Acquire(ctx, in.cfg.leases, claims)
	if err != nil {
		return in.failure(ctx, err)
	}
	if i < 0 {
		return nil
	}
	in.count.denied.Add(1)
	return refusal(&claims[i])
}

// release gives back the slots of a call that started at start (the in-flight limits'
// clock), telling the adaptive limits how long it took.
func (in *Interceptor) release(claims []inflight.Claim, start time.Time) {
	inflight.Release(claims, in.cfg.clock.Now().Sub(start))
}

// refusal is the status of a call refused a slot of c: ResourceExhausted with a QuotaFailure
// (quota_value: the limit) and a RetryInfo, or Unavailable for an adaptive limit (the
// service is overloaded). The subject is the limit's name: the key may be a client's secret.
func refusal(c *inflight.Claim) error {
	d := c.Decision()
	code, msg := codes.ResourceExhausted, fmt.Sprintf("grpclimit: in-flight limit reached (%s: %d in flight)", c.Name, c.Slot.InFlight)
	if c.Overload() {
		code, msg = codes.Unavailable, fmt.Sprintf("grpclimit: at the adaptive in-flight limit (%s: %d)", c.Name, d.Limit)
	}
	qf := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: c.Name,
		Description: fmt.Sprintf("limit %q (%d in flight) reached", c.Name, d.Limit), QuotaId: c.Name, QuotaValue: d.Limit}}}
	if d.RetryAfter < 0 {
		st, _ := status.New(code, msg+": the call's class can never be admitted").WithDetails(qf)
		return st.Err()
	}
	delay := ceil(d.RetryAfter, time.Millisecond)
	st, _ := status.New(code, msg+"; retry in "+delay.String()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}, qf)
	return st.Err()
}

// checkLeases refuses in-flight limits over a store that keeps no leases, and makes the
// Leases that hold their slots when WithLeases gave none.
func (in *Interceptor) checkLeases(l *sluice.Limiter, routes []Route) error {
	if in.cfg.leases != nil {
		return nil
	}
	if inflight.Leases(l.Store()) {
		in.cfg.leases = sluice.NewLeases(l.Store(), sluice.WithClock(in.cfg.clock))
		return nil
	}
	for i, r := range routes {
		for j, lim := range r.Limits {
			if lim.InFlight != nil {
				return fmt.Errorf("grpclimit: routes[%d].limits[%d] (%q).in_flight: %w (the limiter's store is not a sluice.Leaser)", i, j, lim.Name, sluice.ErrNoLeaser)
			}
		}
	}
	return nil
}

package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Interceptor limits gRPC calls by its routes. Its methods return the server interceptors
// (Unary, Stream) and the client interceptors (UnaryClient, StreamClient). It is safe for
// concurrent use; one Interceptor may serve several servers and clients, which then share its
// limits' state through the limiter's store.
type Interceptor struct {
	door *rpclimit.Door[string] // a call is its full method name
	cfg  settings

	classOnce sync.Once // criticality.go
}

// New returns an Interceptor that checks each call against the limits of the route it
// matches (see Route), on limiter. The error, when routes are malformed, names the field
// ("grpclimit: routes[1].limits[0] ("per-ip").rule: ...").
func New(limiter *sluice.Limiter, routes []Route, opts ...Option) (*Interceptor, error) {
	if limiter == nil {
		return nil, errors.New("grpclimit: limiter: nil")
	}
	in := &Interceptor{cfg: settings{policy: distributed.FailOpen, log: slog.Default(),
		clock: sluice.SystemClock{}, headers: HeadersOnDenial}}
	for _, o := range opts {
		o.apply(&in.cfg)
	}
	switch {
	case in.cfg.policy != distributed.FailOpen && in.cfg.policy != distributed.FailClosed:
		return nil, fmt.Errorf("grpclimit: failure policy: %v: want fail_open or fail_closed (for local, wrap the store in distributed.NewFallback)", in.cfg.policy)
	case in.cfg.log == nil:
		return nil, errors.New("grpclimit: logger: nil")
	case in.cfg.clock == nil:
		return nil, errors.New("grpclimit: clock: nil")
	case in.cfg.headers != HeadersOnDenial && in.cfg.headers != HeadersX && in.cfg.headers != HeadersNone:
		return nil, fmt.Errorf("grpclimit: headers: %v: want on_denial, x or none", in.cfg.headers)
	case in.cfg.wait < 0:
		return nil, fmt.Errorf("grpclimit: wait: negative (%v)", in.cfg.wait)
	}
	// Every route's limits, each a pipeline limit and its key.
	rs := make([]rpclimit.Route[string], len(routes))
	for i, r := range routes {
		rs[i].Procedure = r.Method
		for _, l := range r.Limits {
			rs[i].Limits = append(rs[i].Limits, pipeline.Limit{Name: l.Name, Rule: l.Rule, Shares: l.Shares, Hot: l.Hot, InFlight: l.InFlight, Adaptive: l.Adaptive, Budget: l.Budget})
			rs[i].Keys = append(rs[i].Keys, l.Key)
		}
	}
	door, err := rpclimit.Compile(pipeline.Config{Name: "grpclimit", Limiter: limiter, Leases: in.cfg.leases, Failure: in.cfg.policy,
		Log: in.cfg.log, Clock: in.cfg.clock, Stats: &pipeline.Stats{}}, "method", rs)
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	door.Class, door.Cost = func(ctx context.Context, _ string) sluice.Criticality { return in.class(ctx) }, in.cfg.cost
	in.door = door
	return in, nil
}

// call is a call decided: its Request (Done it when the call ends) and outcome.
type call struct {
	q   *pipeline.Request
	o   pipeline.Outcome
	err error // the status error to answer with; nil to run the call
}

// sendHeaders reports whether the header metadata goes with the call's answer.
func (c *call) sendHeaders(s HeaderStyle) bool {
	return c.o.Decided && (s == HeadersX || s == HeadersOnDenial && c.o.Answer == pipeline.Deny)
}

// end gives back the call's slots (after its handler) and its Request.
func (c *call) end() { c.q.Done() }

// check decides a call to fullMethod under the limits lims (req: a unary call's request
// message, nil for a stream). wait is how long it may wait to be admitted (client interceptors
// with WithWait).
func (in *Interceptor) check(ctx context.Context, fullMethod string, lims []rpclimit.Ref[string], req any, wait time.Duration) call {
	q, o, a := in.door.Check(ctx, fullMethod, lims, fullMethod, req, wait)
	return call{q: q, o: o, err: statusOf(a)}
}

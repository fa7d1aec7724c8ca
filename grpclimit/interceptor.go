package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// Interceptor limits gRPC calls by its routes. Its methods return the server interceptors
// (Unary, Stream) and the client interceptors (UnaryClient, StreamClient). It is safe for
// concurrent use; one Interceptor may serve several servers and clients, which then share its
// limits' state through the limiter's store.
type Interceptor struct {
	pl     *pipeline.Pipeline
	routes *routes
	cfg    settings

	classOnce sync.Once // criticality.go
}

// The kinds of the application's defects the interceptor reports (pipeline.Defect).
const (
	defectCost = iota // a cost function that panicked or returned less than 1
	defectKey         // a key function that panicked
	numDefects
)

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
	if err := checkRoutes(routes); err != nil {
		return nil, err
	}
	// Every route's limits, flattened: the pipeline's limits; each route a group of them.
	var specs []pipeline.Limit
	var paths []string
	var keys []Key
	groups := make([][]int, len(routes))
	for i, r := range routes {
		for j, l := range r.Limits {
			groups[i] = append(groups[i], len(specs))
			specs = append(specs, pipeline.Limit{Name: l.Name, Rule: l.Rule, Shares: l.Shares, Hot: l.Hot, InFlight: l.InFlight, Adaptive: l.Adaptive, Budget: l.Budget})
			paths = append(paths, "routes["+strconv.Itoa(i)+"].limits["+strconv.Itoa(j)+"]")
			keys = append(keys, l.Key)
		}
	}
	pl, err := pipeline.New(pipeline.Config{Name: "grpclimit", Limiter: limiter, Leases: in.cfg.leases, Failure: in.cfg.policy,
		Log: in.cfg.log, Clock: in.cfg.clock, Stats: &pipeline.Stats{}}, specs, paths, groups, numDefects)
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	in.pl = pl
	in.routes = newRoutes(routes, groups, keys)
	return in, nil
}

// call is a call decided: its Request (Finish and Put it when the call ends) and outcome.
type call struct {
	q   *pipeline.Request
	o   pipeline.Outcome
	err error // the status error to answer with; nil to run the call
}

// sendHeaders reports whether the header metadata goes with the call's answer.
func (c *call) sendHeaders(s HeaderStyle) bool {
	return c.o.Decided && (s == HeadersX || s == HeadersOnDenial && c.o.Verdict == pipeline.Deny)
}

// end gives back the call's slots (after its handler) and its Request.
func (c *call) end() {
	c.q.Finish()
	c.q.Put()
}

// check decides a call to fullMethod under the limits lims. wait is how long it may wait to
// be admitted (client interceptors with WithWait).
func (in *Interceptor) check(ctx context.Context, fullMethod string, lims []limitRef, req any, wait time.Duration) call {
	q := in.pl.Get()
	if err := in.keys(ctx, q, fullMethod, lims, in.costOf(ctx, fullMethod, req)); err != nil {
		return call{q: q, err: err}
	}
	if q.Empty() {
		return call{q: q}
	}
	o := q.Decide(ctx, wait)
	return call{q: q, o: o, err: in.answer(ctx, q, o)}
}

// keys adds to q the key of each limit of lims that has one for the call: the limit's name, a
// colon and the call's key. A key function that panics fails the call with codes.Internal.
func (in *Interceptor) keys(ctx context.Context, q *pipeline.Request, fullMethod string, lims []limitRef, n int64) (err error) {
	var name string
	defer func() {
		if p := recover(); p != nil {
			in.pl.Defect(defectKey, "grpclimit: key function panicked; call refused with Internal",
				slog.String("limit", name), slog.String("method", fullMethod), slog.Any("panic", p))
			err = status.Errorf(codes.Internal, "grpclimit: key function of limit %q failed", name)
		}
	}()
	class, classKnown := sluice.Critical, false
	for _, l := range lims {
		name = in.pl.Limit(l.index).Name
		buf := q.Begin(l.index)
		if l.key != nil {
			var ok bool
			if buf, ok = l.key(ctx, fullMethod, buf); !ok {
				continue
			}
		}
		if q.Classed(l.index) && !classKnown {
			class, classKnown = in.class(ctx), true
		}
		q.Add(l.index, buf, n, class)
	}
	return nil
}

// costOf returns the call's cost: 1, or the cost function's answer when it is at least 1.
func (in *Interceptor) costOf(ctx context.Context, fullMethod string, req any) (n int64) {
	if in.cfg.cost == nil {
		return 1
	}
	defer func() {
		if p := recover(); p != nil {
			in.pl.Defect(defectCost, "grpclimit: cost function panicked; the call costs 1",
				slog.String("method", fullMethod), slog.Any("panic", p))
			n = 1
		}
	}()
	n = in.cfg.cost(ctx, fullMethod, req)
	if n < 1 {
		in.pl.Defect(defectCost, "grpclimit: cost function returned less than 1; the call costs 1",
			slog.String("method", fullMethod), slog.Int64("cost", n))
		n = 1
	}
	return n
}

// answer writes a decided call's outcome as its status: nil to run it.
func (in *Interceptor) answer(ctx context.Context, q *pipeline.Request, o pipeline.Outcome) error {
	switch o.Verdict {
	case pipeline.Deny:
		if o.Err != nil { // the call's context ended its wait for a slot
			return status.FromContextError(o.Err).Err()
		}
		checks := q.Checks()
		if b := q.BudgetChecks(); len(b) > 0 {
			checks = append(checks[:len(checks):len(checks)], b...)
		}
		return denial(checks, o.Decision, resetOf(checks, o.Decision))
	case pipeline.Refuse:
		return refusal(q.Refused())
	case pipeline.Unavailable:
		return status.Error(codes.Unavailable, "grpclimit: rate limiter unavailable")
	case pipeline.Invalid:
		var fe *sluice.FieldError
		errors.As(o.Err, &fe)
		return status.Errorf(codes.InvalidArgument, "grpclimit: rate-limit key: %s", fe.Reason)
	case pipeline.Canceled:
		return status.FromContextError(ctx.Err()).Err()
	}
	return nil
}

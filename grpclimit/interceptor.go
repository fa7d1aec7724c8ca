package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/internal/logthrottle"
)

// Interceptor limits gRPC calls by its routes. Its methods return the server interceptors
// (Unary, Stream) and the client interceptors (UnaryClient, StreamClient). It is safe for
// concurrent use; one Interceptor may serve several servers and clients, which then share its
// limits' state through the limiter's store.
type Interceptor struct {
	limiter *sluice.Limiter
	routes  *routes
	cfg     settings
	count   counters

	storeLog, keyLog, costLog logthrottle.Throttle
	classOnce                 sync.Once                // criticality.go
	hot                       map[string]*hotkey.Param // by limit name (hot.go)
}

// New returns an Interceptor that checks each call against the limits of the route it
// matches (see Route), on limiter. The error, when routes are malformed, names the field
// ("grpclimit: routes[1].limits[0] ("per-ip").rule: ...").
func New(limiter *sluice.Limiter, routes []Route, opts ...Option) (*Interceptor, error) {
	if limiter == nil {
		return nil, errors.New("grpclimit: limiter: nil")
	}
	in := &Interceptor{limiter: limiter, cfg: settings{policy: distributed.FailOpen, log: slog.Default(),
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
	t, err := newRoutes(routes)
	if err != nil {
		return nil, err
	}
	if err := checkLeases(limiter, routes); err != nil {
		return nil, err
	}
	in.routes = t
	if err := in.buildHot(routes); err != nil {
		return nil, err
	}
	return in, nil
}

// verdict is the outcome of checking one call.
type verdict struct {
	decision sluice.Decision  // the limits' combined decision (see sluice.Combine)
	reset    time.Duration    // the reset the call is told (resetOf)
	decided  bool             // whether decision holds one: a limit applied and the store answered
	err      error            // the status error to answer with; nil to run the call
	claims   []inflight.Claim // the in-flight limits the call must take a slot of (inflight.go)
}

// sendHeaders reports whether the header metadata goes with the call's answer.
func (v *verdict) sendHeaders(s HeaderStyle) bool {
	return v.decided && (s == HeadersX || s == HeadersOnDenial && v.err != nil)
}

// check decides a call to fullMethod under limits. wait is how long it may wait to be admitted
// (client interceptors with WithWait).
func (in *Interceptor) check(ctx context.Context, fullMethod string, limits []Limit, req any, wait time.Duration) verdict {
	var room [4]sluice.Check // most calls have few limits: no allocation for the checks
	var hot hotkey.Batch
	var claims []inflight.Claim
	checks, err := in.keys(ctx, fullMethod, limits, in.costOf(ctx, fullMethod, req), room[:0], &hot, &claims)
	if err != nil || len(checks) == 0 {
		return verdict{err: err, claims: claims}
	}
	if err := hot.Charge(ctx, in.limiter, checks); err != nil {
		return verdict{err: in.failure(ctx, err)}
	}
	d, err := in.decide(ctx, checks, wait)
	if err != nil {
		return verdict{err: in.failure(ctx, err)}
	}
	hot.Record(checks)
	v := verdict{decision: d, reset: resetOf(checks, d), decided: true, claims: claims}
	if d.Allowed {
		in.count.allowed.Add(1)
	} else {
		in.count.denied.Add(1)
		v.err = denial(checks, d, v.reset)
	}
	return v
}

// keys appends to checks the checks of a call: one per limit that has a key for it, its store
// key the limit's name, a colon and the call's key. The keys of hot limits are observed in
// hot; those admitted cold have no check. A key function that panics fails the call with
// codes.Internal.
func (in *Interceptor) keys(ctx context.Context, fullMethod string, limits []Limit, n int64, checks []sluice.Check, hot *hotkey.Batch, claims *[]inflight.Claim) (out []sluice.Check, err error) {
	var name string
	defer func() {
		if p := recover(); p != nil {
			in.count.invalid.Add(1)
			in.logError(&in.keyLog, "grpclimit: key function panicked; call refused with Internal",
				slog.String("limit", name), slog.String("method", fullMethod), slog.Any("panic", p))
			out, err = nil, status.Errorf(codes.Internal, "grpclimit: key function of limit %q failed", name)
		}
	}()
	var buf [128]byte
	for _, l := range limits {
		name = l.Name
		key := append(append(buf[:0], l.Name...), ':')
		if l.Key != nil {
			var ok bool
			if key, ok = l.Key(ctx, fullMethod, key); !ok {
				continue
			}
		}
		k := string(key)
		if p := in.hot[l.Name]; l.Hot != nil && p != nil && hot.Observe(p, len(checks), k, n).Cold {
			continue
		}
		if l.InFlight != nil {
			*claims = append(*claims, in.claim(ctx, &l, k))
			if !l.rated() {
				continue
			}
		}
		checks = append(checks, sluice.Check{Key: k, Rule: l.Rule, N: n})
		if l.Shares != nil {
			c := &checks[len(checks)-1]
			c.Criticality = in.class(ctx)
			c.Reserve = l.Shares.Reserve(c.Criticality, l.Rule.Capacity())
		}
	}
	return checks, nil
}

// costOf returns the call's cost: 1, or the cost function's answer when it is at least 1.
func (in *Interceptor) costOf(ctx context.Context, fullMethod string, req any) (n int64) {
	if in.cfg.cost == nil {
		return 1
	}
	defer func() {
		if p := recover(); p != nil {
			in.count.invalid.Add(1)
			in.logError(&in.costLog, "grpclimit: cost function panicked; the call costs 1",
				slog.String("method", fullMethod), slog.Any("panic", p))
			n = 1
		}
	}()
	n = in.cfg.cost(ctx, fullMethod, req)
	if n < 1 {
		in.count.invalid.Add(1)
		in.logError(&in.costLog, "grpclimit: cost function returned less than 1; the call costs 1",
			slog.String("method", fullMethod), slog.Int64("cost", n))
		n = 1
	}
	return n
}

// decide is Limiter.AllowAll (or WaitAll, when wait is positive) without the key in its
// errors: keys may be API keys, which the failure log leaves out.
func (in *Interceptor) decide(ctx context.Context, checks []sluice.Check, wait time.Duration) (sluice.Decision, error) {
	var d sluice.Decision
	var err error
	if wait > 0 {
		d, err = in.limiter.WaitAll(ctx, checks, wait)
	} else {
		d, err = in.limiter.AllowAll(ctx, checks)
	}
	if u := errors.Unwrap(err); u != nil {
		err = u // without AllowAll's "check i (key ...): "
	}
	return d, err
}

// failure maps an error of the limiter to the call's answer: the caller's own context ending
// is its status; a key the store refuses (too long: a client's oversized metadata) is
// InvalidArgument; anything else is a store failure, logged, counted, and answered by the
// failure policy.
func (in *Interceptor) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return status.FromContextError(ctx.Err()).Err()
	}
	if fe := (*sluice.FieldError)(nil); errors.As(err, &fe) && errors.Is(err, sluice.ErrInvalidKey) {
		in.count.invalid.Add(1)
		in.logError(&in.keyLog, "grpclimit: key refused by the store; call refused with InvalidArgument",
			slog.String("field", fe.Field), slog.String("reason", fe.Reason))
		return status.Errorf(codes.InvalidArgument, "grpclimit: rate-limit key: %s", fe.Reason)
	}
	in.count.storeErrors.Add(1)
	in.logError(&in.storeLog, "grpclimit: store error; call answered by the failure policy",
		slog.String("policy", in.cfg.policy.String()), slog.String("err", err.Error()))
	if in.cfg.policy == distributed.FailClosed {
		return status.Error(codes.Unavailable, "grpclimit: rate limiter unavailable")
	}
	return nil
}

// logError logs msg at level Error through t: at most one line a second of each kind, with
// the number held back since the last in "suppressed".
func (in *Interceptor) logError(t *logthrottle.Throttle, msg string, attrs ...slog.Attr) {
	t.Log(context.Background(), in.cfg.log, in.cfg.clock.Now(), slog.LevelError, msg, attrs...)
}

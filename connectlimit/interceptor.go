package connectlimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/pipeline"
	"github.com/sluicehq/sluice/internal/rpclimit"
)

// Limit is one limit a call must pass, grpclimit.Limit's fields with Connect's Key (nil: every
// call alike). Its store key is Name + ":" + the call's key, as grpclimit's, so a limit of one
// name in both is one budget; Shares reads the X-Criticality header; a handler's call holds its
// InFlight slot until it returns, a stream until it ends; a Budget is committed when the
// handler returns, at what it reported with Settle (at the estimate, its cost, when nothing).
type Limit struct {
	Name     string
	Rule     sluice.Rule
	Key      Key
	Shares   *sluice.Shares
	Hot      *hotkey.Config
	InFlight *sluice.InFlight
	Adaptive *adaptive.Gradient
	Budget   *sluice.Budget
}

// Route gives the limits of the calls to Procedure: "/pkg.Service/Method", "/pkg.Service/" (its
// other procedures) or "" (every other call). All its limits must admit a call; none: exempt.
type Route struct {
	Procedure string
	Limits    []Limit
}

// Interceptor is a connect.Interceptor for handlers and clients, made by New, safe for
// concurrent use. All it serves share its limits' state through the limiter's store.
type Interceptor struct {
	door *rpclimit.Door[Call]
	cfg  settings
}

// New returns an Interceptor deciding calls by their routes' limits on limiter. Its error names
// each problem's field ("connectlimit: routes[1].limits[0] ("billing").rule: ...").
func New(limiter *sluice.Limiter, routes []Route, opts ...Option) (*Interceptor, error) {
	in := &Interceptor{cfg: settings{pc: pipeline.Config{Name: "connectlimit", Limiter: limiter, Stats: &httplimit.Stats{}}}}
	for _, o := range opts {
		o.apply(&in.cfg)
	}
	if in.cfg.wait < 0 {
		return nil, fmt.Errorf("connectlimit: %w", &sluice.FieldError{Field: "wait", Reason: "negative", Err: sluice.ErrInvalidRule})
	}
	rs := make([]rpclimit.Route[Call], len(routes))
	for i, r := range routes {
		rs[i].Procedure = r.Procedure
		for _, l := range r.Limits {
			rs[i].Limits = append(rs[i].Limits, pipeline.Limit{Name: l.Name, Rule: l.Rule, Shares: l.Shares, Hot: l.Hot, InFlight: l.InFlight, Adaptive: l.Adaptive, Budget: l.Budget})
			rs[i].Keys = append(rs[i].Keys, l.Key)
		}
	}
	door, err := rpclimit.Compile(in.cfg.pc, "procedure", rs)
	if err != nil {
		return nil, fmt.Errorf("connectlimit: %w", err)
	}
	door.Class = func(_ context.Context, c Call) sluice.Criticality {
		return door.Pipeline.Class(c.Header.Get(httplimit.DefaultCriticalityHeader))
	}
	door.Cost, in.door = in.cfg.cost, door
	return in, nil
}

// Stats returns the interceptor's counters, those of every transport (read them with Load).
func (in *Interceptor) Stats() *httplimit.Stats { return in.door.Pipeline.Stats() }

// WrapUnary limits unary calls: a refused handler's call gets the refusal without running the
// handler, an admitted one the rate-limit headers; a refused client's call fails locally with
// the same error, never reaching the network, unless WithWait lets it wait for its slot.
func (in *Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		refs := in.door.Routes.Match(spec.Procedure)
		if len(refs) == 0 {
			return next(ctx, req)
		}
		q, err := in.check(ctx, refs, Call{Spec: spec, Peer: req.Peer(), Header: req.Header()}, req.Any(), func() http.Header {
			if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
				return info.ResponseHeader()
			}
			return http.Header{}
		})
		defer q.Done()
		if err != nil {
			return nil, err
		}
		if s := rpclimit.Settling(ctx, q); s != nil {
			defer s.End()
			return next(s, req)
		}
		return next(ctx, req)
	}
}

// WrapStreamingHandler limits a handler's streams when they open: one its limits refuse ends
// with the refusal before the handler runs; an admitted one holds its slots until it ends.
func (in *Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		refs := in.door.Routes.Match(conn.Spec().Procedure)
		if len(refs) == 0 {
			return next(ctx, conn)
		}
		q, err := in.check(ctx, refs, Call{Spec: conn.Spec(), Peer: conn.Peer(), Header: conn.RequestHeader()}, nil, conn.ResponseHeader)
		defer q.Done()
		if err != nil {
			return err
		}
		if s := rpclimit.Settling(ctx, q); s != nil {
			defer s.End()
			return next(s, conn)
		}
		return next(ctx, conn)
	}
}

// Settle reports that serving the call of ctx, a handler's, cost cost more units, for its
// budgets (Limit.Budget): grpclimit.Settle's rules.
func Settle(ctx context.Context, cost int64) bool { return rpclimit.Settle(ctx, cost) }

// WrapStreamingClient limits a client's streams when they open (before their header is
// written): a refused one fails its Send and Receive, never reaching the network.
func (in *Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if refs := in.door.Routes.Match(spec.Procedure); len(refs) > 0 {
			q, err := in.check(ctx, refs, Call{Spec: spec, Peer: conn.Peer(), Header: conn.RequestHeader()}, nil, nil)
			if q.Done(); err != nil {
				return &refused{StreamingClientConn: conn, err: err}
			}
		}
		return conn
	}
}

// refused is a client's stream its limits refused: it fails with err, never sending.
type refused struct {
	connect.StreamingClientConn
	err *connect.Error
}

func (c *refused) Send(any) error               { return c.err }
func (c *refused) Receive(any) error            { return c.err }
func (c *refused) CloseRequest() error          { return nil }
func (c *refused) CloseResponse() error         { return nil }
func (c *refused) ResponseHeader() http.Header  { return c.err.Meta() }
func (c *refused) ResponseTrailer() http.Header { return http.Header{} }

// check decides a call under refs (msg: a unary call's request message): its Request (Done it
// when the call ends) and the *connect.Error refusing it; an admitted handler's call gets its
// rate-limit headers in out's.
func (in *Interceptor) check(ctx context.Context, refs []rpclimit.Ref[Call], call Call, msg any, out func() http.Header) (*pipeline.Request, *connect.Error) {
	var wait time.Duration
	if call.Spec.IsClient {
		wait = in.cfg.wait
	}
	q, o, a := in.door.Check(ctx, call.Spec.Procedure, refs, call, msg, wait)
	if a == nil {
		if o.Decided && !call.Spec.IsClient && in.cfg.headers != httplimit.HeadersNone && in.cfg.headers != httplimit.HeadersOnDenial {
			httplimit.SetHeaders(out(), in.cfg.headers, q.Results())
		}
		return q, nil
	}
	err := connect.NewError(connect.Code(a.Code), errors.New(a.Message))
	for _, m := range a.Details() {
		if d, e := connect.NewErrorDetail(m); e == nil {
			err.AddDetail(d)
		}
	}
	if o.Decided {
		httplimit.SetHeaders(err.Meta(), in.cfg.headers, q.Results())
	}
	if s, ok := a.RetryAfter(); ok {
		err.Meta().Set("Retry-After", strconv.FormatInt(s, 10))
	}
	return q, err
}

// Option configures an Interceptor.
type Option interface{ apply(*settings) }

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

type settings struct {
	pc      pipeline.Config
	cost    func(ctx context.Context, call Call, msg any) int64
	headers httplimit.HeaderStyle
	wait    time.Duration
}

// WithFailurePolicy sets what a call gets when the store cannot decide: distributed.FailOpen
// (the default) runs it, FailClosed answers CodeUnavailable, FailLocal decides with WithLocalLimiter's.
func WithFailurePolicy(p distributed.FailurePolicy) Option {
	return optionFunc(func(s *settings) { s.pc.Failure = p })
}

// WithLocalLimiter sets the local limiter of FailLocal.
func WithLocalLimiter(l *sluice.Limiter) Option {
	return optionFunc(func(s *settings) { s.pc.Local = l })
}

// WithCost sets each call's cost (default 1); msg is a unary call's request, nil for a stream
// (charged when it opens). A cost below 1, or a panic, is a defect, logged and counted: cost 1.
func WithCost(f func(ctx context.Context, call Call, msg any) int64) Option {
	return optionFunc(func(s *settings) { s.cost = f })
}

// WithLogger sets the logger (default slog.Default()); each kind of line at most once a second.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(s *settings) { s.pc.Log = l }) }

// WithClock sets the clock of waits, in-flight round trips and logs (default the system's).
func WithClock(c sluice.Clock) Option { return optionFunc(func(s *settings) { s.pc.Clock = c }) }

// WithHeaderStyle sets the rate-limit headers of answers, as httplimit's (default HeadersBoth).
func WithHeaderStyle(h httplimit.HeaderStyle) Option {
	return optionFunc(func(s *settings) { s.headers = h })
}

// WithLeases sets the Leases of in-flight limits (default: one on the limiter's store).
func WithLeases(ls *sluice.Leases) Option { return optionFunc(func(s *settings) { s.pc.Leases = ls }) }

// WithWait makes a client's call past its limits wait for its slot up to max, within its
// deadline (default 0: fail at once). Handlers never wait.
func WithWait(max time.Duration) Option { return optionFunc(func(s *settings) { s.wait = max }) }

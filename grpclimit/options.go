package grpclimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/httplimit"
)

// CostFunc returns the cost of a call, in units of the limits' rules: for example the
// number of items of a batch request. req is the request message of a unary call, and nil
// for a stream (whose cost is charged once, when it opens). A cost below 1, or a panic, is a
// defect of the function: it is logged and counted (Stats.Invalid) and the call costs 1, so a
// request can neither refund quota nor pass for free.
type CostFunc func(ctx context.Context, fullMethod string, req any) int64

// Option configures an Interceptor.
type Option interface{ apply(*settings) }

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

type settings struct {
	policy  distributed.FailurePolicy
	cost    CostFunc
	log     *slog.Logger
	headers HeaderStyle
	wait    time.Duration
	clock   sluice.Clock
	leases  *sluice.Leases
}

// WithFailurePolicy sets what a call gets when the store cannot decide:
// distributed.FailOpen (the default) runs it, distributed.FailClosed answers
// codes.Unavailable; either way the failure is counted (Stats.StoreErrors) and logged at
// level Warn, at most once a second. It is httplimit's failure handler, with the same
// semantics: a key the store refuses is InvalidArgument whatever the policy, and a call
// whose own context ended before it was decided gets its context's status. distributed.FailLocal
// is not a policy here: wrap the store in distributed.NewFallback, which then always decides.
func WithFailurePolicy(p distributed.FailurePolicy) Option {
	return optionFunc(func(s *settings) { s.policy = p })
}

// WithCost sets the cost of each call (default 1). See CostFunc.
func WithCost(f CostFunc) Option { return optionFunc(func(s *settings) { s.cost = f }) }

// WithLogger sets the logger of store failures and of defects in key and cost functions
// (default slog.Default()). Each kind of line is written at most once a second, with the
// number of lines held back since the last one ("suppressed").
func WithLogger(l *slog.Logger) Option { return optionFunc(func(s *settings) { s.log = l }) }

// HeaderStyle is the one header-style type of Sluice's transports, httplimit.HeaderStyle.
// Server interceptors send the binding limit's state (the limit with the least remaining) as
// the x-ratelimit-limit, x-ratelimit-remaining and x-ratelimit-reset header metadata (seconds
// until the key is back to full, rounded up), by one of the styles below; the others (the
// IETF draft's headers) are HTTP's only.
type HeaderStyle = httplimit.HeaderStyle

// The header styles of gRPC.
const (
	// HeadersOnDenial sends them with refused calls only (the default): admitted calls pay
	// nothing for them, and a refused client reads them beside the RetryInfo.
	HeadersOnDenial = httplimit.HeadersOnDenial
	// HeadersX sends them on every call the limits decided. In gRPC's header path that
	// costs about 17 allocations and 2 KB per call (docs/BENCHMARKS.md).
	HeadersX = httplimit.HeadersX
	// HeadersNone sends none.
	HeadersNone = httplimit.HeadersNone
)

// WithHeaderStyle sets when server interceptors send rate-limit header metadata (default
// HeadersOnDenial).
func WithHeaderStyle(h HeaderStyle) Option { return optionFunc(func(s *settings) { s.headers = h }) }

// WithWait makes the client interceptors wait, for at most max and never past the call's
// deadline, until the limits admit a call, instead of failing it at once with
// codes.ResourceExhausted (the default, max 0). A call that could not be admitted in time
// fails at once, without waiting; one whose context ends while it waits fails with the
// context's status (Canceled or DeadlineExceeded). A waiting call sleeps until the
// RetryAfter of the limits and asks again, so under contention another call may take the slot
// first; it then waits again, within the same bound. Server interceptors never wait.
func WithWait(max time.Duration) Option { return optionFunc(func(s *settings) { s.wait = max }) }

// WithClock sets the clock the client interceptors wait on, and that spaces log lines
// (default sluice.SystemClock).
func WithClock(c sluice.Clock) Option { return optionFunc(func(s *settings) { s.clock = c }) }

// WithLeases sets the Leases that hold the slots of the in-flight limits (Limit.InFlight):
// its store, its clock, its criticality shares, and its counts (Held, Lost,
// FailedReleases) for the caller to read. The default is a Leases on the limiter's store, with
// the clock of WithClock.
func WithLeases(ls *sluice.Leases) Option { return optionFunc(func(s *settings) { s.leases = ls }) }

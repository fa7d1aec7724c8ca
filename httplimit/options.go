package httplimit

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// Option configures Middleware.
type Option interface{ apply(*middleware) }

type optionFunc func(*middleware)

func (f optionFunc) apply(m *middleware) { f(m) }

// Limit is one limit the middleware enforces: Rule, counted per Key, on the requests whose
// route and method match (a "policy" in the RateLimit headers). Every matching limit of a
// request is decided together, with sluice.Limiter.AllowAll semantics: the request passes
// only if all allow it, and a denied request consumes from none.
type Limit struct {
	// Name identifies the policy in the RateLimit headers, the 429 body and the store keys:
	// required, unique, at most 64 printable ASCII characters without '"', '\' or ':'.
	Name string
	// Rule is the limit.
	Rule sluice.Rule
	// Key is what requests are counted by; the zero Key is KeyIP.
	Key Key
	// Routes, when not empty, restricts the policy to requests whose route pattern
	// (r.Pattern, see KeyRoute) is one of these.
	Routes []string
	// Methods, when not empty, restricts the policy to these methods ("GET", "POST").
	Methods []string
	// Cost, when not nil, is the number of units a request costs under this policy; nil means
	// the middleware's cost (WithCost, default 1). A cost of 0 leaves the request uncounted by
	// the policy. A negative cost, or a panic, is logged and charged 1: a request never
	// refunds quota by its cost, and never goes free because the cost function failed.
	Cost func(r *http.Request) int64
	// Hot, when not nil, makes the policy a hot parameter (package hotkey): each value of Key
	// (a KeyQuery or KeyHeader, say) keeps its own limit, but only the values hot in this
	// process reach the store; cold ones are admitted on the sketch's bound, in bounded
	// memory whatever the number of values. Their requests have no RateLimit headers from
	// this policy.
	Hot *hotkey.Config
	// Shares, when not nil, share the policy's capacity between criticality classes: a
	// request of class c (WithCriticalityHeader) is admitted only while c's share holds, so
	// the lowest classes are shed first (sluice.Limiter.AllowClass). With InFlight, the class
	// also decides the slot (sluice.Leases.AcquireClass, with the shares of the Leases,
	// WithLeases).
	Shares *sluice.Shares
	// InFlight, when not nil, bounds the requests of one Key in flight at once, across every
	// process sharing the limiter's store: a request its rate limits admit takes a slot
	// (sluice.Leases.Acquire, a lease renewed while held; WithLeases) and holds it until the handler
	// returns. A request refused a slot is answered 429, its policy named in the problem
	// (Retry-After at most 1 s: a slot frees when a request ends), and it has been counted by
	// the rate limits as any answered request is. A Limit may have InFlight alone: its zero
	// Rule is then no rate limit. In-flight limits add no RateLimit header (they have no
	// window). Not with Hot.
	InFlight *sluice.InFlight
	// Adaptive, with InFlight, is the in-flight limit in force instead of InFlight.Limit
	// (which may be 0; InFlight gives the lease): it follows the handler's latency, told each
	// request's time in the handler. A request refused by it is answered 503
	// (temporary-reduced-capacity, Retry-After: 1): the service is overloaded, not the client
	// over its quota.
	Adaptive *adaptive.Gradient
	// Budget, when not nil, makes the policy a budget of a cost known only after the
	// response (LLM tokens, money; Budget's Rule is ignored: Rule is the budget): the
	// request's cost under it (Cost, WithCost, or with WithLLM its estimate) is reserved
	// once the rate limits admit it, all budgets together (sluice.Limiter.ReserveAll), and
	// committed at the real cost after the handler: the cost it reports with Settle (the
	// estimate when it reports none), or with WithLLM the usage its response reports, metered
	// as it streams. A budget that refuses denies the request (429, the policy named,
	// Retry-After when it frees), the rate limits' units given back. Its RateLimit header
	// shows what the budget had left before the request (its own estimate not counted), so
	// remaining falls after each response by what it cost. Not with Hot nor InFlight.
	Budget *sluice.Budget
}

// WithLimits adds limits. Middleware with no limit returns the handler unchanged.
func WithLimits(p ...Limit) Option {
	return optionFunc(func(m *middleware) { m.limits = append(m.limits, p...) })
}

// WithResolver sets how KeyIP finds the client address behind proxies. The default trusts no
// proxy: the client is the connection's peer and forwarding headers are ignored.
func WithResolver(r *clientip.Resolver) Option {
	return optionFunc(func(m *middleware) { m.resolver = r })
}

// WithIPv6Prefix sets the prefix length KeyIP groups IPv6 clients by (default 64; 128 keys
// each address alone).
func WithIPv6Prefix(bits int) Option { return optionFunc(func(m *middleware) { m.v6Bits = bits }) }

// WithServeMux makes KeyRoute and Limit.Routes read the pattern mux would route a request to,
// for a middleware that wraps the mux (r.Pattern is only set inside it).
func WithServeMux(mux *http.ServeMux) Option {
	return optionFunc(func(m *middleware) { m.mux = mux })
}

// WithHeaderStyle selects the rate-limit headers (default HeadersBoth).
func WithHeaderStyle(s HeaderStyle) Option { return optionFunc(func(m *middleware) { m.style = s }) }

// WithCost sets the cost of a request for the limits without a Cost of their own (default
// 1). See Limit.Cost for 0, negative costs and panics.
func WithCost(f func(r *http.Request) int64) Option {
	return optionFunc(func(m *middleware) { m.cost = f })
}

// WithDenial replaces WriteDenial as the answer to a denied request. The rate-limit headers
// are already set when it runs. It must not keep results after returning.
func WithDenial(f func(w http.ResponseWriter, r *http.Request, results []Result)) Option {
	return optionFunc(func(m *middleware) { m.deny = f })
}

// WithFailurePolicy sets what happens to a request when the store cannot decide (default
// distributed.FailOpen): distributed.FailOpen lets it through, so an outage of the limiter
// does not become an outage of the service; distributed.FailClosed answers 503 with a
// temporary-reduced-capacity problem and Retry-After: 1; distributed.FailLocal decides with
// the local limiter of WithLocalLimiter, and fails open if that fails too. Every such error is
// counted (Stats.StoreErrors) and logged at level Warn, at most once a second. It is the
// failure handler of every library transport (grpclimit's too), with one semantics: a key
// the store refuses (a client's value too long to key by) is answered 400 whatever the
// policy, and a request whose own context ended before it was decided gets a 503 and counts
// no store error.
func WithFailurePolicy(p distributed.FailurePolicy) Option {
	return optionFunc(func(m *middleware) { m.pc.Failure = p })
}

// WithLocalLimiter sets the local limiter distributed.FailLocal decides with while the store
// is unavailable, typically one on a memory store, with the same limits, and makes FailLocal
// the failure policy. (A store wrapped in distributed.Fallback decides locally inside the
// store, on a limiter of its own that keeps the global budget.)
func WithLocalLimiter(l *sluice.Limiter) Option {
	return optionFunc(func(m *middleware) { m.pc.Local, m.pc.Failure = l, distributed.FailLocal })
}

// WithLeases sets the Leases that hold the slots of the in-flight limits (Limit.InFlight):
// its store, its clock, its criticality shares, and its counts (Held, Lost,
// FailedReleases) for the caller to read. The default is a Leases on the limiter's store, with
// the clock of WithClock.
func WithLeases(ls *sluice.Leases) Option {
	return optionFunc(func(m *middleware) { m.pc.Leases = ls })
}

// WithWait shapes instead of rejecting: a denied request waits until its limits would allow
// it, at most max and never past the request's context, and is rejected only when that is not
// enough (or can never be: a cost above a policy's capacity).
func WithWait(max time.Duration) Option { return optionFunc(func(m *middleware) { m.maxWait = max }) }

// WithLogger sets the logger of store errors and bad input (default slog.Default()). Each kind
// of problem is logged at most once a second, with the number held back since the last
// ("suppressed").
func WithLogger(l *slog.Logger) Option { return optionFunc(func(m *middleware) { m.log = l }) }

// WithStats counts the middleware's outcomes into s.
func WithStats(s *Stats) Option { return optionFunc(func(m *middleware) { m.pc.Stats = s }) }

// WithClock sets the clock of X-RateLimit-Reset, of shaping waits and of log rate limiting
// (default sluice.SystemClock). Decisions use the store's clock.
func WithClock(c sluice.Clock) Option { return optionFunc(func(m *middleware) { m.clock = c }) }

// WithKeyPrefix sets the prefix of every store key (default "http:"); a key is the prefix,
// the policy name, ':' and the key parts separated by '|'.
func WithKeyPrefix(p string) Option { return optionFunc(func(m *middleware) { m.prefix = p }) }

// Stats counts what the middleware did: the one Stats of Sluice's library transports
// (grpclimit's Interceptor.Stats reads the same counters). Read the fields with Load; they are
// safe for concurrent use:
//
//   - Allowed: requests passed to the handler after their limits admitted them (waited ones
//     included);
//   - Denied: requests answered by the denial (429) or refused a slot of an in-flight limit;
//   - StoreErrors: requests the store could not decide, whatever the failure policy;
//     FailedOpen and FailedClosed: those let through or refused (503) because of it;
//   - Waited: requests that waited (WithWait) and were then allowed;
//   - BadInput: defects of the application's functions (a cost function that panicked or
//     returned a negative cost, a key function that panicked) and input that cannot be used
//     (a key the store refused, too long: 400; a negative cost given to Settle);
//   - Settled: requests whose reported cost was settled (WithSettle); SettleErrors the
//     settles the store refused or could not make.
type Stats = pipeline.Stats

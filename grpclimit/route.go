package grpclimit

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/hotkey"
)

// Limit is one limit a call must pass.
type Limit struct {
	// Name names the limit: the store key of a call is Name + ":" + its key, and denials name
	// it (QuotaFailure's quota_id). Limits with the same Name share their state, so the same
	// Limit listed in several routes is one budget across them; they must have the same Rule.
	Name string
	// Rule is enforced on each key.
	Rule sluice.Rule
	// Key keys a call. A call it reports no key for (ok false) is not limited by this limit.
	// Nil keys every call with the same key: one budget for all calls the limit applies to
	// (client-side limiting of a downstream service, a global guard).
	Key Key
	// Shares, when not nil, share the limit's capacity between criticality classes: a call
	// of class c (CriticalityMetadata, WithCriticality) passes only while c's share holds, so
	// the lowest classes are shed first.
	Shares *sluice.Shares
	// Hot, when not nil, makes the limit a hot parameter (package hotkey): each key (a
	// KeyMetadata value, say) keeps its own limit, but only the keys hot in this process reach
	// the store; cold ones pass on the sketch's bound, in bounded memory whatever the number
	// of keys. Limits sharing a Name share one sketch.
	Hot *hotkey.Config
	// InFlight, when not nil, bounds the calls of one key in flight at once, across every
	// process sharing the limiter's store (server interceptors; the client interceptors
	// enforce the rate limits only): a call its rate limits admit takes a slot
	// (sluice.Leases.Acquire, a lease renewed while held; WithLeases) and holds it until its handler
	// returns, a stream until it ends. A call refused a slot ends with
	// codes.ResourceExhausted, a QuotaFailure naming the limit and a RetryInfo of at most a
	// second. A Limit may have InFlight alone: its zero Rule is then no rate limit. Not with
	// Hot.
	InFlight *sluice.InFlight
	// Adaptive, with InFlight, is the in-flight limit in force instead of InFlight.Limit
	// (InFlight gives the lease): it follows the handlers' latency (package adaptive). A call
	// it refuses ends with codes.Unavailable: the service is overloaded.
	Adaptive *adaptive.Gradient
	// Budget, when not nil, makes the limit a budget of a cost known only after the call
	// (Budget's Rule is ignored: Rule is the budget): the call's cost (WithCost) is reserved
	// once the rate limits admit it (sluice.Limiter.ReserveAll, with the call's other
	// budgets) and committed after the handler at the cost it reports with Settle, or at the
	// estimate when it reports none. A budget that refuses denies the call as a rate limit
	// does (ResourceExhausted, its QuotaFailure naming the budget, RetryInfo until it
	// frees). Not with Hot nor InFlight.
	Budget *sluice.Budget
}

// Route gives the limits of the calls it matches.
type Route struct {
	// Method matches calls: a full method name "/pkg.Service/Method" matches that method,
	// "/pkg.Service/" every method of the service that has no route of its own, and "" every
	// call no other route matches. The most specific route wins; its limits alone apply.
	Method string
	// Limits are checked together: the call passes only if every one admits it. A route
	// with no limits exempts the calls it matches.
	Limits []Limit
}

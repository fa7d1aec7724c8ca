package grpclimit

import (
	"fmt"
	"strings"

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

// routes finds a call's limits: an exact method first, then its service, then the default.
// Lookups take a substring of the method and allocate nothing.
type routes struct {
	methods  map[string][]limitRef
	services map[string][]limitRef
	fallback []limitRef
	empty    bool // no route has a limit
}

// limitRef is a limit of a route: the pipeline's limit and how the route keys calls by it.
type limitRef struct {
	index int
	key   Key
}

// checkRoutes checks each route's Method: well formed and given once.
func checkRoutes(rs []Route) error {
	seen := map[string]bool{}
	for i, r := range rs {
		field := fmt.Sprintf("routes[%d]", i)
		if err := checkMethod(r.Method); err != nil {
			return fmt.Errorf("grpclimit: %s.method: %w", field, err)
		}
		if seen[r.Method] {
			return fmt.Errorf("grpclimit: %s.method: %q is given twice", field, r.Method)
		}
		seen[r.Method] = true
	}
	return nil
}

// newRoutes indexes rs, whose limits are the pipeline's limits groups[i] (in order), keyed by
// keys[limit].
func newRoutes(rs []Route, groups [][]int, keys []Key) *routes {
	t := &routes{methods: map[string][]limitRef{}, services: map[string][]limitRef{}, empty: true}
	for i, r := range rs {
		var refs []limitRef
		for _, k := range groups[i] {
			refs = append(refs, limitRef{index: k, key: keys[k]})
			t.empty = false
		}
		switch {
		case r.Method == "":
			t.fallback = refs
		case strings.HasSuffix(r.Method, "/"):
			t.services[r.Method] = refs
		default:
			t.methods[r.Method] = refs
		}
	}
	return t
}

// checkMethod accepts "", "/pkg.Service/" and "/pkg.Service/Method".
func checkMethod(m string) error {
	if m == "" {
		return nil
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !strings.HasPrefix(m, "/") || !ok || svc == "" || strings.Contains(method, "/") {
		return fmt.Errorf("%q: want \"/pkg.Service/Method\", \"/pkg.Service/\" or \"\" (every other call)", m)
	}
	return nil
}

// match returns the limits of the call to the full method name fullMethod.
func (t *routes) match(fullMethod string) []limitRef {
	if t.empty {
		return nil
	}
	if l, ok := t.methods[fullMethod]; ok {
		return l
	}
	if i := strings.LastIndexByte(fullMethod, '/'); i > 0 {
		if l, ok := t.services[fullMethod[:i+1]]; ok {
			return l
		}
	}
	return t.fallback
}

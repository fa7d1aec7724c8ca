package distributed

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

// FailurePolicy says what is decided while the store cannot decide: by a Fallback while its
// circuit is open, and by the transports (httplimit, grpclimit) on a store error. It is the
// one failure-policy type of Sluice; store.Decorators.Fallback names one (ParseFailurePolicy).
type FailurePolicy uint8

// The failure policies. Their String forms are the names used in configuration.
const (
	// FailLocal decides with a local limiter instead of the store: in a Fallback, its own,
	// whose limit is the rule's share for this instance (limit / live instances, or the safe
	// capacity), so the fleet keeps the global budget; in a transport (httplimit,
	// connectlimit), the limiter its WithLocalLimiter gave.
	FailLocal FailurePolicy = iota + 1
	// FailOpen admits every request.
	FailOpen
	// FailClosed denies every request.
	FailClosed
)

var policyNames = [...]string{FailLocal: "local", FailOpen: "fail_open", FailClosed: "fail_closed"}

// String returns the policy's name.
func (p FailurePolicy) String() string {
	if p.Valid() {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Valid reports whether p is a known policy.
func (p FailurePolicy) Valid() bool { return p >= FailLocal && p <= FailClosed }

// ParseFailurePolicy returns the policy with the given name (local, fail_open, fail_closed).
func ParseFailurePolicy(name string) (FailurePolicy, error) {
	for p := FailLocal; p <= FailClosed; p++ {
		if policyNames[p] == name {
			return p, nil
		}
	}
	return 0, fmt.Errorf("distributed: policy: unknown %q (want local, fail_open or fail_closed)", name)
}

// share returns the rule scaled to one instance's share: limit x fraction, at least 1 (and the
// burst likewise).
func share(r sluice.Rule, fraction float64) sluice.Rule {
	if fraction >= 1 {
		return r
	}
	r.Limit = max(1, int64(float64(r.Limit)*fraction))
	if r.Burst > 0 {
		r.Burst = max(1, int64(float64(r.Burst)*fraction))
	}
	return r
}

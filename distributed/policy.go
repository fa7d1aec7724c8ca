package distributed

import (
	"fmt"

	"github.com/sluicehq/sluice"
)

// Policy says how Fallback decides while the store is unavailable.
type Policy uint8

// The policies. Their String forms are the names used in configuration.
const (
	// PolicyLocal decides with a local limiter whose limit is the rule's share for this
	// instance: limit / live instances (or the safe capacity), so the fleet keeps the global
	// budget.
	PolicyLocal Policy = iota + 1
	// PolicyFailOpen admits every request.
	PolicyFailOpen
	// PolicyFailClosed denies every request.
	PolicyFailClosed
)

var policyNames = [...]string{PolicyLocal: "local", PolicyFailOpen: "fail_open", PolicyFailClosed: "fail_closed"}

// String returns the policy's name.
func (p Policy) String() string {
	if p.Valid() {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Valid reports whether p is a known policy.
func (p Policy) Valid() bool { return p >= PolicyLocal && p <= PolicyFailClosed }

// ParsePolicy returns the policy with the given name (local, fail_open, fail_closed).
func ParsePolicy(name string) (Policy, error) {
	for p := PolicyLocal; p <= PolicyFailClosed; p++ {
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

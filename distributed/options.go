package distributed

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Option configures a decorator of this package: NewOverLimit, NewAsync or NewFallback. Each
// option's doc says which constructors it applies to; passing it to another one is an error
// naming both (distributed: NewOverLimit: WithInterval does not apply). An invalid value is
// an error naming the option.
type Option struct {
	name      string
	overLimit func(*overLimitConfig)
	async     func(*asyncConfig)
	fallback  func(*fallbackConfig)
}

// applyOptions applies opts to cfg through the setter field picks out of each option, or
// names the first option that does not apply to the constructor ctor.
func applyOptions[C any](ctor string, opts []Option, cfg *C, field func(Option) func(*C)) error {
	for _, o := range opts {
		set := field(o)
		if set == nil {
			if o.name == "" {
				return fmt.Errorf("distributed: %s: the zero Option does not apply", ctor)
			}
			return fmt.Errorf("distributed: %s: %s does not apply", ctor, o.name)
		}
		set(cfg)
	}
	return nil
}

// WithClock sets the clock the decorator reads (default the system clock). It applies to
// NewOverLimit, NewAsync and NewFallback.
//
//   - OverLimit turns the store's RetryAfter into an instant on it: it should tell the same
//     time as the wrapped store's clock.
//   - Async decides and schedules its syncs on it. Processes sharing keys must agree on the
//     time, as windows are aligned to the Unix epoch.
//   - Fallback's local limiter decides on it, and it says when to probe an open circuit and
//     when to send a heartbeat. The timeout of a store call stays a real-time bound (a context
//     deadline) whatever the clock.
func WithClock(clock sluice.Clock) Option {
	return Option{name: "WithClock",
		overLimit: func(c *overLimitConfig) { c.clock = clock },
		async:     func(c *asyncConfig) { c.clock = clock },
		fallback:  func(c *fallbackConfig) { c.clock = clock }}
}

// WithTimeout bounds each store round trip in real time, as a context deadline. It applies to
// NewAsync and NewFallback.
//
//   - Async: each sync (default: the interval, at least 100 ms). It must not be negative.
//   - Fallback: every store call (default DefaultFallbackTimeout). A call that takes longer is
//     decided by policy and opens the circuit. It must be positive.
func WithTimeout(d time.Duration) Option {
	return Option{name: "WithTimeout",
		async:    func(c *asyncConfig) { c.timeout = d },
		fallback: func(c *fallbackConfig) { c.timeout = d }}
}

// WithMaxKeys bounds the keys the decorator holds state for. It must be positive. It applies
// to NewOverLimit, NewAsync and NewFallback.
//
//   - OverLimit: the cached denials (default DefaultOverLimitMaxKeys). When full, a new denial
//     replaces an expired entry or the one that expires soonest among a few sampled.
//   - Async: the keys with a local view (default DefaultAsyncMaxKeys). When full, a new key
//     evicts an idle one, or else is decided by the wrapped store's Take.
//   - Fallback: the keys whose last store decision it remembers, to start them from it when
//     the circuit opens, and whose outage consumption it writes back when it closes (default
//     DefaultFallbackMaxKeys). When full, a new key replaces one whose last decision no longer
//     binds, or the one that binds the shortest; a key that owes the store its outage
//     consumption is never dropped (its admissions are then not written back).
func WithMaxKeys(n int) Option {
	return Option{name: "WithMaxKeys",
		overLimit: func(c *overLimitConfig) { c.maxKeys = n },
		async:     func(c *asyncConfig) { c.maxKeys = n },
		fallback:  func(c *fallbackConfig) { c.maxKeys = n }}
}

// WithInterval sets Async's sync interval (default DefaultInterval). It must be positive. It
// applies to NewAsync.
func WithInterval(d time.Duration) Option {
	return Option{name: "WithInterval", async: func(c *asyncConfig) { c.interval = d }}
}

// WithMaxStaleness makes Async's Take fail with sluice.ErrStoreUnavailable when the last
// successful sync is older than d, so that an outer Fallback takes over during a long outage
// instead of every process admitting up to the limit on its own. The default, 0, keeps
// deciding on the stale view. It applies to NewAsync.
func WithMaxStaleness(d time.Duration) Option {
	return Option{name: "WithMaxStaleness", async: func(c *asyncConfig) { c.maxStale = d }}
}

// WithSyncWrites selects Async's write-through variant: an admission is written to the store
// at once (one round trip that also returns fresh totals), while reads stay asynchronous,
// every interval, so denied requests never touch the network. It applies to NewAsync.
func WithSyncWrites() Option {
	return Option{name: "WithSyncWrites", async: func(c *asyncConfig) { c.syncWrites = true }}
}

// WithManualSync disables Async's background sync: the caller drives it with Sync, for
// example a simulation on virtual time. It applies to NewAsync.
func WithManualSync() Option {
	return Option{name: "WithManualSync", async: func(c *asyncConfig) { c.manual = true }}
}

// WithFailures sets K, the consecutive failures that open a Fallback's circuit (default
// DefaultFailures). A timeout opens it at once. It applies to NewFallback.
func WithFailures(k int) Option {
	return Option{name: "WithFailures", fallback: func(c *fallbackConfig) { c.failures = k }}
}

// WithProbeInterval sets how often an open circuit probes the store (default
// DefaultProbeInterval): at every multiple of it on the Fallback's clock, so that a fleet's
// instances, on clocks that agree, switch back to the store together. It applies to
// NewFallback.
func WithProbeInterval(d time.Duration) Option {
	return Option{name: "WithProbeInterval", fallback: func(c *fallbackConfig) { c.probe = d }}
}

// WithHeartbeat sets how often a Fallback announces its instance (default
// DefaultHeartbeatInterval); the heartbeat lives three intervals. It applies to NewFallback.
func WithHeartbeat(d time.Duration) Option {
	return Option{name: "WithHeartbeat", fallback: func(c *fallbackConfig) { c.heartbeat = d }}
}

// WithFailurePolicy sets a Fallback's policy for every rule (default FailLocal). It applies to
// NewFallback.
func WithFailurePolicy(p FailurePolicy) Option {
	return Option{name: "WithFailurePolicy", fallback: func(c *fallbackConfig) { c.policy = p }}
}

// WithFailurePolicyFunc chooses a Fallback's policy per rule; an invalid result means FailLocal.
// It applies to NewFallback.
func WithFailurePolicyFunc(f func(sluice.Rule) FailurePolicy) Option {
	return Option{name: "WithFailurePolicyFunc", fallback: func(c *fallbackConfig) { c.policyFn = f }}
}

// WithInstances sets the estimate of live instances a Fallback uses when the store cannot
// count them (no sluice.Heartbeater) and until the first heartbeat answers (default 1).
// It applies to NewFallback.
func WithInstances(n int) Option {
	return Option{name: "WithInstances", fallback: func(c *fallbackConfig) { c.instances = n }}
}

// WithSafeCapacity sets the share of each rule's limit this instance may admit while the
// store is down, in (0, 1], overriding the instance count. It applies to NewFallback.
func WithSafeCapacity(fraction float64) Option {
	return Option{name: "WithSafeCapacity", fallback: func(c *fallbackConfig) { c.safe = fraction }}
}

// WithGroup names the group of instances that share the budget (default DefaultGroup). It
// applies to NewFallback.
func WithGroup(name string) Option {
	return Option{name: "WithGroup", fallback: func(c *fallbackConfig) { c.group = name }}
}

// WithInstanceID names this instance in heartbeats (default a random id). It applies to
// NewFallback.
func WithInstanceID(id string) Option {
	return Option{name: "WithInstanceID", fallback: func(c *fallbackConfig) { c.id = id }}
}

// WithManualProbe disables a Fallback's background probe and heartbeat: the caller drives
// them with Probe, for example a simulation on virtual time (like WithManualSync for Async).
// It applies to NewFallback.
func WithManualProbe() Option {
	return Option{name: "WithManualProbe", fallback: func(c *fallbackConfig) { c.manual = true }}
}

// OnCircuitChange registers f, called on every change of a Fallback's state (for metrics and
// logs). It runs synchronously in the goroutine that changes the state and must not block.
// It applies to NewFallback.
func OnCircuitChange(f func(from, to Circuit)) Option {
	return Option{name: "OnCircuitChange", fallback: func(c *fallbackConfig) { c.onChange = f }}
}

// OnStoreError registers f, called with each failure of a store call that a Fallback absorbs
// (for metrics and logs): a decision's call that failed as unavailable or outlived the
// timeout (that request then decided by policy; it is called before the failure opens the
// circuit, so the last error it saw is the cause of the change), a failed probe of an open
// circuit, and a failed heartbeat. Probe and heartbeat errors are wrapped to say which call
// failed ("distributed: probe: ..."). A decision that fails for another reason (bad input,
// the caller's context ending) is returned to the caller, not passed to f. f runs
// synchronously in the goroutine of the call and must not block. It applies to NewFallback.
func OnStoreError(f func(err error)) Option {
	return Option{name: "OnStoreError", fallback: func(c *fallbackConfig) { c.onError = f }}
}

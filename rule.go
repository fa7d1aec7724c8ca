package sluice

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Algorithm names a rate-limiting algorithm. The zero value is invalid.
type Algorithm uint8

// The algorithms. Their String forms are the stable snake_case names used in config files,
// JSON, flags and metrics.
const (
	// AlgorithmFixedWindow counts requests in windows aligned to the Unix epoch. Up to twice the
	// limit can pass around a window edge.
	AlgorithmFixedWindow Algorithm = iota + 1
	// AlgorithmSlidingLog keeps the time of every admitted request: exact, O(limit) memory.
	AlgorithmSlidingLog
	// AlgorithmSlidingWindow weights the oldest of SubWindows+1 counters: the two-window
	// approximation when SubWindows is 1.
	AlgorithmSlidingWindow
	// AlgorithmTokenBucket refills Limit tokens per Period continuously up to Burst.
	AlgorithmTokenBucket
	// AlgorithmLeakyBucket drains Limit per Period from a bucket of size Burst: a meter for
	// Allow, a queue that spaces requests evenly for Wait.
	AlgorithmLeakyBucket
	// AlgorithmGCRA is the generic cell rate algorithm: a token bucket kept as one timestamp.
	AlgorithmGCRA
)

var algorithmNames = [...]string{
	AlgorithmFixedWindow:   "fixed_window",
	AlgorithmSlidingLog:    "sliding_log",
	AlgorithmSlidingWindow: "sliding_window",
	AlgorithmTokenBucket:   "token_bucket",
	AlgorithmLeakyBucket:   "leaky_bucket",
	AlgorithmGCRA:          "gcra",
}

// Algorithms lists every algorithm in a stable order.
func Algorithms() []Algorithm {
	return []Algorithm{AlgorithmFixedWindow, AlgorithmSlidingLog, AlgorithmSlidingWindow,
		AlgorithmTokenBucket, AlgorithmLeakyBucket, AlgorithmGCRA}
}

// String returns the algorithm's snake_case name, or "algorithm(N)" for an invalid value.
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Valid reports whether a names a known algorithm.
func (a Algorithm) Valid() bool { return a >= AlgorithmFixedWindow && a <= AlgorithmGCRA }

// Bucket reports whether a is one of the bucket algorithms (token bucket, leaky bucket, GCRA),
// which take a Burst and can schedule future slots for Wait.
func (a Algorithm) Bucket() bool {
	return a == AlgorithmTokenBucket || a == AlgorithmLeakyBucket || a == AlgorithmGCRA
}

// ParseAlgorithm returns the algorithm with the given snake_case name.
func ParseAlgorithm(name string) (Algorithm, error) {
	for a := AlgorithmFixedWindow; a <= AlgorithmGCRA; a++ {
		if algorithmNames[a] == name {
			return a, nil
		}
	}
	return 0, fieldError(ErrInvalidRule, "algorithm", "unknown %q (want one of %s)", name,
		strings.Join(algorithmNames[1:], ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if !a.Valid() {
		return nil, fieldError(ErrInvalidRule, "algorithm", "unknown value %d", uint8(a))
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Limits on rule values, checked by Validate.
const (
	// MaxLimit is the largest Limit or Burst a rule may have.
	MaxLimit = 1_000_000_000
	// MaxSlidingLogLimit bounds the sliding log, which keeps one timestamp per admitted
	// request: 1,000,000 timestamps are 8 MB per key in memory.
	MaxSlidingLogLimit = 1_000_000
	// MaxSubWindows bounds the sliding window's number of sub-windows.
	MaxSubWindows = 60
	// MinPeriod is the shortest period: one millisecond, the resolution every store agrees on.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest period, 366 days.
	MaxPeriod = 366 * 24 * time.Hour
)

// Rule says how much may pass: Limit units per Period, counted by Algorithm. The zero Rule is
// invalid. Rules are small values: copy them freely, and pass a different rule for the same key
// to change its limit at run time (stores keep the consumed state where the algorithm allows).
type Rule struct {
	// Algorithm counts the units.
	Algorithm Algorithm `json:"algorithm"`
	// Limit is the number of units allowed per Period; for bucket algorithms, the refill (or
	// drain) rate is Limit per Period.
	Limit int64 `json:"limit"`
	// Period is the window length, or the time over which a bucket refills Limit units. It must
	// be a whole number of milliseconds.
	Period time.Duration `json:"period"`
	// Burst is the bucket capacity of token bucket, leaky bucket and GCRA; 0 means Limit. It
	// must be 0 for the window algorithms.
	Burst int64 `json:"burst,omitempty"`
	// SubWindows is the number of sub-windows of the sliding window (0 means 1: the classic
	// weighted previous window). Period must divide evenly into them. Must be 0 for other
	// algorithms.
	SubWindows int `json:"sub_windows,omitempty"`
}

// Per returns a sliding-window rule allowing limit units per period: Sluice's default, which
// is close to exact (see docs/ALGORITHMS.md) in constant memory.
func Per(limit int64, period time.Duration) Rule {
	return Rule{Algorithm: AlgorithmSlidingWindow, Limit: limit, Period: period}
}

// PerSecond returns Per(limit, time.Second).
func PerSecond(limit int64) Rule { return Per(limit, time.Second) }

// PerMinute returns Per(limit, time.Minute).
func PerMinute(limit int64) Rule { return Per(limit, time.Minute) }

// PerHour returns Per(limit, time.Hour).
func PerHour(limit int64) Rule { return Per(limit, time.Hour) }

// FixedWindow returns a fixed-window rule: limit units per window of length period.
func FixedWindow(limit int64, period time.Duration) Rule {
	return Rule{Algorithm: AlgorithmFixedWindow, Limit: limit, Period: period}
}

// SlidingLog returns an exact sliding-log rule: at most limit units in any period.
func SlidingLog(limit int64, period time.Duration) Rule {
	return Rule{Algorithm: AlgorithmSlidingLog, Limit: limit, Period: period}
}

// SlidingWindow returns a sliding-window rule with the given number of sub-windows (1 is the
// two-window approximation).
func SlidingWindow(limit int64, period time.Duration, subWindows int) Rule {
	return Rule{Algorithm: AlgorithmSlidingWindow, Limit: limit, Period: period, SubWindows: subWindows}
}

// TokenBucket returns a token-bucket rule refilling limit tokens per period, holding at most
// burst tokens (0 means limit).
func TokenBucket(limit int64, period time.Duration, burst int64) Rule {
	return Rule{Algorithm: AlgorithmTokenBucket, Limit: limit, Period: period, Burst: burst}
}

// LeakyBucket returns a leaky-bucket rule draining limit units per period from a bucket (or
// queue) of size capacity (0 means limit).
func LeakyBucket(limit int64, period time.Duration, capacity int64) Rule {
	return Rule{Algorithm: AlgorithmLeakyBucket, Limit: limit, Period: period, Burst: capacity}
}

// GCRA returns a GCRA rule emitting limit units per period with a burst tolerance of burst
// units (0 means limit).
func GCRA(limit int64, period time.Duration, burst int64) Rule {
	return Rule{Algorithm: AlgorithmGCRA, Limit: limit, Period: period, Burst: burst}
}

// WithBurst returns a copy of r with the given burst.
func (r Rule) WithBurst(burst int64) Rule { r.Burst = burst; return r }

// WithAlgorithm returns a copy of r counted by a.
func (r Rule) WithAlgorithm(a Algorithm) Rule { r.Algorithm = a; return r }

// Capacity returns the most units the rule can ever admit at once: Burst (or Limit when Burst
// is 0) for bucket algorithms, Limit for window algorithms.
func (r Rule) Capacity() int64 {
	if r.Algorithm.Bucket() && r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// Windows returns the sliding window's sub-window count (SubWindows, or 1 when 0).
func (r Rule) Windows() int64 {
	if r.SubWindows <= 0 {
		return 1
	}
	return int64(r.SubWindows)
}

// Validate reports whether the rule can be enforced. The error is a *FieldError wrapping
// ErrInvalidRule, naming the field.
func (r Rule) Validate() error {
	if !r.Algorithm.Valid() {
		return fieldError(ErrInvalidRule, "algorithm", "unknown value %d", uint8(r.Algorithm))
	}
	if r.Limit <= 0 {
		return fieldError(ErrInvalidRule, "limit", "must be positive, got %d", r.Limit)
	}
	if r.Limit > MaxLimit {
		return fieldError(ErrInvalidRule, "limit", "must be at most %d, got %d", int64(MaxLimit), r.Limit)
	}
	if r.Period < MinPeriod || r.Period > MaxPeriod {
		return fieldError(ErrInvalidRule, "period", "must be between %v and %v, got %v", MinPeriod, MaxPeriod, r.Period)
	}
	if r.Period%time.Millisecond != 0 {
		return fieldError(ErrInvalidRule, "period", "must be a whole number of milliseconds, got %v", r.Period)
	}
	if r.Algorithm.Bucket() {
		if r.Burst < 0 || r.Burst > MaxLimit {
			return fieldError(ErrInvalidRule, "burst", "must be between 0 (= limit) and %d, got %d", int64(MaxLimit), r.Burst)
		}
	} else if r.Burst != 0 {
		return fieldError(ErrInvalidRule, "burst", "not used by %s, got %d", r.Algorithm, r.Burst)
	}
	if r.Algorithm == AlgorithmSlidingWindow {
		if r.SubWindows < 0 || r.SubWindows > MaxSubWindows {
			return fieldError(ErrInvalidRule, "sub_windows", "must be between 0 (= 1) and %d, got %d", MaxSubWindows, r.SubWindows)
		}
		if r.Period%(time.Duration(r.Windows())*time.Millisecond) != 0 {
			return fieldError(ErrInvalidRule, "sub_windows", "period %v does not divide into %d whole-millisecond sub-windows", r.Period, r.Windows())
		}
	} else if r.SubWindows != 0 {
		return fieldError(ErrInvalidRule, "sub_windows", "not used by %s, got %d", r.Algorithm, r.SubWindows)
	}
	if r.Algorithm == AlgorithmGCRA && r.Period < time.Duration(r.Limit)*time.Microsecond {
		return fieldError(ErrInvalidRule, "limit", "gcra emits at most one unit per microsecond, got %d per %v", r.Limit, r.Period)
	}
	if r.Algorithm.Bucket() && r.Period/time.Duration(r.Limit) > 0 &&
		r.Capacity() > int64(MaxPeriod)/int64(r.Period/time.Duration(r.Limit)) {
		return fieldError(ErrInvalidRule, "burst", "%d units take longer than %v to refill", r.Capacity(), MaxPeriod)
	}
	if r.Algorithm == AlgorithmSlidingLog && r.Limit > MaxSlidingLogLimit {
		return fieldError(ErrInvalidRule, "limit", "sliding_log keeps one timestamp per request and allows at most %d, got %d", MaxSlidingLogLimit, r.Limit)
	}
	return nil
}

// String formats the rule for logs, e.g. "token_bucket 10/1s burst 20".
func (r Rule) String() string {
	s := fmt.Sprintf("%s %d/%v", r.Algorithm, r.Limit, r.Period)
	if r.Burst != 0 {
		s += fmt.Sprintf(" burst %d", r.Burst)
	}
	if r.SubWindows != 0 {
		s += fmt.Sprintf(" sub_windows %d", r.SubWindows)
	}
	return s
}

// DynamicRule holds a rule that can be changed at run time, for example on config reload or
// from an admin API. Load and Set are safe for concurrent use and allocation-free to Load.
// The next decision made with the loaded rule applies it; stores keep the consumed state
// where the algorithm allows (see package algorithm).
type DynamicRule struct{ p atomic.Pointer[Rule] }

// NewDynamicRule returns a DynamicRule holding r, or an error if r is invalid.
func NewDynamicRule(r Rule) (*DynamicRule, error) {
	d := &DynamicRule{}
	if err := d.Set(r); err != nil {
		return nil, err
	}
	return d, nil
}

// Load returns the current rule.
func (d *DynamicRule) Load() Rule { return *d.p.Load() }

// Set replaces the rule after validating it; an invalid rule leaves the old one in force.
func (d *DynamicRule) Set(r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	d.p.Store(&r)
	return nil
}

package quota

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
)

// Behavior is what a Client does for a bucket without a live assignment.
type Behavior uint8

// The behaviours.
const (
	// OwnRule decides under the request's own Rule (the default).
	OwnRule Behavior = iota
	// Deny denies every request.
	Deny
	// Allow admits every request.
	Allow
	// ReuseLast keeps spending an expired assignment for the time WithReuseFor gives, then
	// falls back to the request's Rule. Only for WithExpired.
	ReuseLast
)

// Defaults of the options.
const (
	DefaultInterval   = time.Second
	DefaultMaxBuckets = 1000
	DefaultReuseFor   = 30 * time.Second
)

// Option configures a Client.
type Option interface{ apply(*settings) }

type optionFunc func(*settings)

func (f optionFunc) apply(s *settings) { f(s) }

type settings struct {
	clock          sluice.Clock
	interval       time.Duration
	bucketID       func(key string) map[string]string
	noAssign       Behavior
	expired        Behavior
	reuseFor       time.Duration
	maxBuckets     int
	maxKeyLen      int
	criticalityKey string
	// criticalityKeySet tells WithCriticalityKey("") from no option.
	criticalityKeySet bool
	logger            *slog.Logger
}

// WithClock sets the clock that times reports and expiries (default sluice.SystemClock).
func WithClock(c sluice.Clock) Option { return optionFunc(func(s *settings) { s.clock = c }) }

// WithInterval sets how often usage is reported (default DefaultInterval), which is also
// how often a broken stream is re-opened.
func WithInterval(d time.Duration) Option { return optionFunc(func(s *settings) { s.interval = d }) }

// WithBucketID sets the bucket id of a key (default {"name": key}). The map must not be
// modified afterwards.
func WithBucketID(f func(key string) map[string]string) Option {
	return optionFunc(func(s *settings) { s.bucketID = f })
}

// WithCriticalityKey adds to every bucket id the entry key carrying the request's class
// (sluice.Request.Criticality, set by Limiter.AllowClass and AllowAll's checks; e.g.
// {"name": key, "criticality": "SHEDDABLE"}), so each class of a key is its own bucket with
// its own share, and a quota server whose rule has the same criticality_key serves the most
// important classes first when the demand exceeds the limit. Without it (the default) the
// class is not reported and every class of a key shares its one assignment.
func WithCriticalityKey(key string) Option {
	return optionFunc(func(s *settings) { s.criticalityKey = key; s.criticalityKeySet = true })
}

// WithNoAssignment sets the behaviour before a bucket's first assignment: OwnRule (default),
// Deny or Allow.
func WithNoAssignment(b Behavior) Option { return optionFunc(func(s *settings) { s.noAssign = b }) }

// WithExpired sets the behaviour once a bucket's assignment has expired: OwnRule (default),
// Deny, Allow or ReuseLast.
func WithExpired(b Behavior) Option { return optionFunc(func(s *settings) { s.expired = b }) }

// WithReuseFor bounds ReuseLast: how long past its expiry an assignment is still spent
// (default DefaultReuseFor).
func WithReuseFor(d time.Duration) Option { return optionFunc(func(s *settings) { s.reuseFor = d }) }

// WithMaxBuckets bounds the buckets a Client tracks (default DefaultMaxBuckets, the server's
// per-stream maximum); keys beyond it are decided under their own Rule, unreported.
func WithMaxBuckets(n int) Option { return optionFunc(func(s *settings) { s.maxBuckets = n }) }

// WithMaxKeyLength sets the longest accepted key (default sluice.DefaultMaxKeyLength).
func WithMaxKeyLength(n int) Option { return optionFunc(func(s *settings) { s.maxKeyLen = n }) }

// WithLogger sets where the client says what it cannot do itself, at most once a second: a
// bucket that stays without an assignment (no quota rule of the domain covers it on the
// server, or the server does not answer). Default slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(s *settings) { s.logger = l }) }

func newSettings(opts []Option) (settings, error) {
	s := settings{clock: sluice.SystemClock{}, interval: DefaultInterval, noAssign: OwnRule, expired: OwnRule,
		reuseFor: DefaultReuseFor, maxBuckets: DefaultMaxBuckets,
		bucketID: func(key string) map[string]string { return map[string]string{"name": key} }}
	for _, o := range opts {
		o.apply(&s)
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	switch {
	case s.clock == nil:
		return s, fmt.Errorf("quota: WithClock: nil clock")
	case s.interval <= 0:
		return s, fmt.Errorf("quota: WithInterval: must be positive, got %v", s.interval)
	case s.bucketID == nil:
		return s, fmt.Errorf("quota: WithBucketID: nil function")
	case s.noAssign > Allow:
		return s, fmt.Errorf("quota: WithNoAssignment: want OwnRule, Deny or Allow, got %d", s.noAssign)
	case s.expired > ReuseLast:
		return s, fmt.Errorf("quota: WithExpired: unknown behaviour %d", s.expired)
	case s.reuseFor < 0:
		return s, fmt.Errorf("quota: WithReuseFor: negative (%v)", s.reuseFor)
	case s.maxBuckets <= 0:
		return s, fmt.Errorf("quota: WithMaxBuckets: must be positive, got %d", s.maxBuckets)
	case s.maxKeyLen < 0:
		return s, fmt.Errorf("quota: WithMaxKeyLength: negative (%d)", s.maxKeyLen)
	case s.criticalityKeySet && s.criticalityKey == "":
		return s, fmt.Errorf("quota: WithCriticalityKey: empty key")
	}
	return s, nil
}

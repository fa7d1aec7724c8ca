package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/fastpath"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/internal/logthrottle"
)

// Config is what a Pipeline decides with and reports to.
type Config struct {
	// Name prefixes its log lines and errors: "httplimit", "grpclimit".
	Name string
	// Limiter decides the rate limits. Required when there is a limit.
	Limiter *sluice.Limiter
	// Leases holds the in-flight slots; nil: a Leases on Limiter's store, on Clock, when a
	// limit has InFlight (its renewer runs only while it holds a slot).
	Leases *sluice.Leases
	// Failure is the failure policy (the zero value is distributed.FailOpen); FailLocal
	// decides with Local, the transport's local limiter (and a Leases on its store).
	Failure distributed.FailurePolicy
	Local   *sluice.Limiter
	// KeyPrefix starts every store key, before the limit's name and ':'.
	KeyPrefix string
	// Log receives the events (default slog.Default()), each kind at most once a second.
	Log *slog.Logger
	// Clock is the clock of log throttling, hot-key sketches and in-flight round trips
	// (default sluice.SystemClock).
	Clock sluice.Clock
	// Stats counts the outcomes; nil: none are counted.
	Stats *Stats
}

// Stats counts what a pipeline did: one set of counters for every transport. Read the fields
// with Load; they are safe for concurrent use.
type Stats struct {
	// Allowed counts requests that passed their limits (waited ones included), rate and
	// in-flight.
	Allowed atomic.Uint64
	// Denied counts requests a rate limit denied or an in-flight limit refused.
	Denied atomic.Uint64
	// StoreErrors counts requests the store could not decide, whatever the failure policy.
	StoreErrors atomic.Uint64
	// FailedOpen and FailedClosed count the requests let through or refused because of a
	// store error.
	FailedOpen, FailedClosed atomic.Uint64
	// Waited counts requests that waited for their slot (a transport that shapes) and were
	// then allowed.
	Waited atomic.Uint64
	// BadInput counts defects: a key the store refused (too long: a client's oversized
	// value), a key or cost function of the application that panicked or returned what it
	// must not, a negative settled cost.
	BadInput atomic.Uint64
	// Settled counts requests whose reported cost was settled; SettleErrors the settles the
	// store refused or could not make.
	Settled, SettleErrors atomic.Uint64
}

// Pipeline is a transport's compiled limits and how it decides them. It is safe for
// concurrent use once built.
type Pipeline struct {
	cfg         Config
	limits      []limit // the valid ones
	kept        []int   // kept[k]: the index in New's limits of limits[k]
	hot         map[string]*hotkey.Param
	leases      *sluice.Leases
	localLeases *sluice.Leases
	stats       *Stats
	// borrowKeys: the limiters' stores copy the keys they keep (the memory store), so keys
	// may point into a Request's pooled buffer instead of being allocated.
	borrowKeys bool

	storeLog, inputLog, releaseLog logthrottle.Throttle
	defectLogs                     []logthrottle.Throttle // by the transport's defect kinds
}

// limit is a compiled Limit.
type limit struct {
	Limit
	prefix string // KeyPrefix + Name + ":"
	hot    *hotkey.Param
}

// New compiles limits, each known to users by paths[i], of which groups list those that apply
// to one request together (every limit for httplimit; a route's for grpclimit; by index in
// limits). Its error joins every problem, each a *LimitError (or a *sluice.FieldError of the
// configuration). The limits at fault are left out: the pipeline's limit k is limits[Kept()[k]],
// so a transport that only logs configuration errors still enforces the others. defects is
// the number of kinds of application defects the transport reports (Defect), each logged
// apart.
func New(cfg Config, limits []Limit, paths []string, groups [][]int, defects int) (*Pipeline, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = sluice.SystemClock{}
	}
	if cfg.Failure == 0 {
		cfg.Failure = distributed.FailOpen
	}
	p := &Pipeline{cfg: cfg, stats: cfg.Stats, defectLogs: make([]logthrottle.Throttle, defects)}
	var errs []error
	switch {
	case cfg.Limiter == nil && len(limits) > 0:
		errs = append(errs, &sluice.FieldError{Field: "limiter", Reason: "nil", Err: sluice.ErrNoStore})
		limits, groups = nil, nil
	case !cfg.Failure.Valid():
		errs = append(errs, &sluice.FieldError{Field: "failure_policy", Reason: cfg.Failure.String() + " is not a failure policy; failing open", Err: sluice.ErrInvalidRule})
		p.cfg.Failure = distributed.FailOpen
	case cfg.Failure == distributed.FailLocal && cfg.Local == nil:
		errs = append(errs, &sluice.FieldError{Field: "local_limiter", Reason: "FailLocal without a local limiter; failing open", Err: sluice.ErrInvalidRule})
		p.cfg.Failure = distributed.FailOpen
	}
	ok, problems := validate(limits, paths, groups)
	errs = append(errs, problems...)
	errs = append(errs, p.compileHot(limits, paths, ok)...)
	if err := p.openLeases(limits, paths, ok); err != nil {
		errs = append(errs, err)
	}
	for i, l := range limits {
		if ok[i] {
			p.limits = append(p.limits, limit{Limit: l, prefix: cfg.KeyPrefix + l.Name + ":", hot: p.sketch(l)})
			p.kept = append(p.kept, i)
		}
	}
	p.borrowKeys = copiesKeys(cfg.Limiter) && (cfg.Local == nil || copiesKeys(cfg.Local))
	return p, errors.Join(errs...)
}

// compileHot builds the sketch of each valid hot limit, one per name, leaving out (ok false)
// a limit whose sketch cannot be built.
func (p *Pipeline) compileHot(limits []Limit, paths []string, ok []bool) []error {
	var errs []error
	for i, l := range limits {
		if !ok[i] || l.Hot == nil || p.hot[l.Name] != nil {
			continue
		}
		hc := *l.Hot
		if hc.Clock == nil {
			hc.Clock = p.cfg.Clock
		}
		hp, err := hotkey.New(l.Rule, hc)
		if err != nil {
			errs = append(errs, &LimitError{Path: paths[i], Name: l.Name, Field: "hot", Err: err})
			ok[i] = false
			continue
		}
		if p.hot == nil {
			p.hot = map[string]*hotkey.Param{}
		}
		p.hot[l.Name] = hp
	}
	return errs
}

// sketch returns l's hot-parameter sketch (shared by the limits of its name), or nil.
func (p *Pipeline) sketch(l Limit) *hotkey.Param {
	if l.Hot == nil {
		return nil
	}
	return p.hot[l.Name]
}

// Kept returns, for each limit of the pipeline, its index in New's limits.
func (p *Pipeline) Kept() []int { return p.kept }

// openLeases makes the Leases of the valid in-flight limits, or, when the limiter's store
// keeps no leases, leaves those limits out (ok false) with an error saying so.
func (p *Pipeline) openLeases(limits []Limit, paths []string, ok []bool) error {
	var names []string
	for i := range limits {
		if ok[i] && limits[i].InFlight != nil {
			names = append(names, paths[i])
		}
	}
	if names == nil {
		return nil
	}
	p.leases = p.cfg.Leases
	if p.leases == nil {
		if !inflight.Leases(p.cfg.Limiter.Store()) {
			for i := range limits {
				if limits[i].InFlight != nil {
					ok[i] = false
				}
			}
			return fmt.Errorf("%s: %v: in_flight: %w (the limiter's store is not a sluice.Leaser)", p.cfg.Name, names, sluice.ErrNoLeaser)
		}
		p.leases = sluice.NewLeases(p.cfg.Limiter.Store(), sluice.WithClock(p.cfg.Clock), sluice.OnReleaseError(p.releaseFailed))
	}
	if p.cfg.Local != nil {
		p.localLeases = sluice.NewLeases(p.cfg.Local.Store(), sluice.WithClock(p.cfg.Clock), sluice.OnReleaseError(p.releaseFailed))
	}
	return nil
}

// copiesKeys reports whether l decides in-process on the memory store, which copies the keys
// it keeps and holds none after a decision returns.
func copiesKeys(l *sluice.Limiter) bool {
	return l != nil && fastpath.IsLocal[sluice.Rule](l.Store())
}

// Limit returns limit i as declared.
func (p *Pipeline) Limit(i int) *Limit { return &p.limits[i].Limit }

// Stats returns the counters (Config.Stats, nil when none).
func (p *Pipeline) Stats() *Stats { return p.stats }

// releaseFailed logs a release of an in-flight slot the store could not take (counted by the
// Leases): the slot stays held until its lease expires. The error is left out: a store's
// message may name the key, which may be a client's secret.
func (p *Pipeline) releaseFailed(err error) {
	p.warn(&p.releaseLog, p.cfg.Name+": the store could not release an in-flight slot; it stays held until its lease expires",
		slog.Bool("timeout", errors.Is(err, context.DeadlineExceeded)))
}

// The events' levels: one per event, whatever the transport. A store failure the failure
// policy answers and a client's bad input are warnings; a defect of the application (a key or
// cost function that panicked) is an error.
const (
	levelStore  = slog.LevelWarn
	levelInput  = slog.LevelWarn
	levelDefect = slog.LevelError
)

// warn logs msg at levelStore through t: at most one line a second of each kind, with the
// number held back since the last in "suppressed".
func (p *Pipeline) warn(t *logthrottle.Throttle, msg string, attrs ...slog.Attr) {
	t.Log(context.Background(), p.cfg.Log, p.cfg.Clock.Now(), levelStore, msg, attrs...)
}

// Defect counts (BadInput) and logs, at most once a second per kind, a defect of the
// application's code: a key or cost function that panicked or returned what it must not.
// kind is one of the transport's defect kinds (New's defects); msg is the whole message.
func (p *Pipeline) Defect(kind int, msg string, attrs ...slog.Attr) {
	if s := p.stats; s != nil {
		s.BadInput.Add(1)
	}
	p.defectLogs[kind].Log(context.Background(), p.cfg.Log, p.cfg.Clock.Now(), levelDefect, msg, attrs...)
}

// BadInput counts and logs (at most once a second) input of a request that cannot be used,
// such as a negative cost reported to Settle.
func (p *Pipeline) BadInput(msg string, attrs ...slog.Attr) {
	if s := p.stats; s != nil {
		s.BadInput.Add(1)
	}
	p.inputLog.Log(context.Background(), p.cfg.Log, p.cfg.Clock.Now(), levelInput, msg, attrs...)
}

// Class returns the criticality class a request carries as text v (a header's value):
// sluice.Critical when v is empty, or names no class, which is counted and logged (BadInput)
// without the value, a client's.
func (p *Pipeline) Class(v string) sluice.Criticality {
	c, ok := sluice.ParseCriticality(v)
	if !ok && v != "" {
		p.BadInput(p.cfg.Name + ": unknown criticality class, decided as CRITICAL")
	}
	return c
}

// Notice logs msg at level Warn through t, the transport's own throttle of one kind of line
// (a request with no route pattern, say), on the pipeline's logger and clock.
func (p *Pipeline) Notice(t *logthrottle.Throttle, msg string, attrs ...slog.Attr) {
	p.warn(t, msg, attrs...)
}

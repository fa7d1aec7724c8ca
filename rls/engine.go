package rls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/logthrottle"
	"github.com/sluicehq/sluice/store"
)

// Defaults of Config's zero values.
const (
	DefaultMaxDescriptors       = 64
	DefaultMaxDescriptorEntries = 16
	// The request-rule ceilings' defaults, set from what a rule costs Redis (measured by
	// TestRequestRuleRedisBytes and TestRequestRuleRedisScriptTime; docs/OPERATIONS.md): one
	// request at the defaults holds at most 32 KiB in Redis (a sliding log of 100 in debt,
	// 200 entries: 25 KB) for at most a day, and its script runs 0.2 to 0.3 ms (1,000 entries:
	// 1.3 to 1.7 ms). At 1,000 and 366 days, one 86-byte request held 236 KB for a year.
	DefaultMaxRequestLogLimit = 100
	DefaultMaxRequestPeriod   = 24 * time.Hour
	DefaultMaxRequestState    = 32 << 10
)

// The values of Config.RequestRules.
const (
	// RequestRulesAny accepts rules supplied by requests, within the ceilings (the default).
	RequestRulesAny = "any"
	// RequestRulesNamed accepts only rules named by the request and defined in the rules
	// config: "rule": "<domain>.<descriptor path>" or "<rate_limit name>" in /v1/allow.
	RequestRulesNamed = "named"
	// RequestRulesOff refuses /v1/allow's key form and descriptors' limit overrides.
	RequestRulesOff = "off"
)

// Config configures an Engine: the rules, the store and the bounds of requests. The zero
// value of every field is a documented default; an Engine needs rules (RulesPath or Rules).
type Config struct {
	// RulesPath is a rules file or directory, watched for changes: the engine's RulesSource is
	// then a FileSource of it, polled every ReloadInterval.
	RulesPath string
	// ReloadInterval is how often RulesPath is polled by Run (default
	// config.DefaultWatchInterval); negative disables polling (Reload still works).
	ReloadInterval time.Duration
	// Rules are static rules, used when there is no rules source (e.g. embedded defaults);
	// with a RulesSource, the rules in force until it delivers.
	Rules *config.Config
	// RulesSource, when RulesPath is empty, delivers the rules (e.g. xDS, package
	// config/xds): Run runs it. Until it delivers (and Rules is nil) every decision is an
	// error wrapping ErrNoRules, and Ready reports it unless ReadyWithoutRules
	// (envoyproxy/ratelimit's FORCE_START_WITHOUT_INITIAL_CONFIG: healthy before the first
	// rules).
	RulesSource       RulesSource
	ReadyWithoutRules bool
	// RulesOptions say how the rules at RulesPath are read and compiled: the default
	// algorithm, merged domains, envoyproxy/ratelimit's runtime directory tree. The default
	// algorithm is also that of limit overrides (Descriptor.Limit).
	RulesOptions config.Options
	// Store decides; when nil, the store StoreConfig describes is opened (store.Open) and
	// closed by Close. A Store passed here is not closed by the engine.
	Store sluice.Store
	// StoreConfig names the store to open when Store is nil: URL, distribution mode,
	// fallback and per-call timeout (default: memory, sync mode, no fallback). With a
	// fallback, the engine hooks its OnCircuitChange and OnStoreError (calling any set here
	// too) to log each change, tell the Observer of the failures and report the state in
	// Ready and Fallback; a fallback inside a Store passed above is not observed. Its Logger,
	// when nil, is the engine's.
	StoreConfig store.Config
	// GlobalStore, when set, decides the limits of scope global: the regions' store
	// (package distributed/regions), which shares each such limit between the regions. Nil:
	// the store decides them too (one region). Not closed by the engine.
	GlobalStore sluice.Store
	// WrapStore, when set, wraps the store the engine decides on (Store, or the one
	// StoreConfig opened): the server's tracing makes each store call a child span with it.
	// The readiness probe goes through it too.
	WrapStore func(sluice.Store) sluice.Store
	// Logger receives reload, (rate-limited) store error lines, and each change of the
	// fallback's state; nothing is logged per request. Default: discard.
	Logger *slog.Logger
	// Observer is told every decision and what else the engine does, for metrics (package
	// server/rlsmetrics counts them in Prometheus series). Default: nothing observes.
	Observer Observer
	// Clock is the engine's time: the resets of blocks, the live view's rates, the readiness
	// probe's and the fallback's times, the throttle of store error lines. Default
	// sluice.SystemClock. The store's time is StoreConfig.Clock (or the Store's own).
	Clock sluice.Clock
	// MaxDescriptors bounds the descriptors of a request (default DefaultMaxDescriptors),
	// MaxDescriptorEntries the entries of one descriptor (default
	// DefaultMaxDescriptorEntries); MaxKeyLength bounds a descriptor's store key (default
	// sluice.DefaultMaxKeyLength).
	MaxDescriptors, MaxDescriptorEntries, MaxKeyLength int
	// RequestRules says which rules a request may bring: RequestRulesAny (default, also
	// ""), RequestRulesNamed or RequestRulesOff. It covers the rule of the key form
	// (DecideKey) and the limit override of a descriptor.
	RequestRules string
	// MaxRequestLogLimit bounds the limit of a sliding_log rule supplied by a request (default
	// DefaultMaxRequestLogLimit, at most sluice.MaxSlidingLogLimit): one call of the sliding
	// log's Redis script inserts or removes up to that many entries, and no other decision on
	// that Redis runs meanwhile. MaxRequestPeriod bounds the period of a rule supplied by a
	// request (default DefaultMaxRequestPeriod, at most sluice.MaxPeriod): how long its state
	// is kept. MaxRequestStateBytes bounds the state of a rule supplied by a
	// request as Redis holds it, 128 bytes per entry of a sliding log and 2 x limit entries in
	// debt (default DefaultMaxRequestState). Each is checked before any store call; rules of
	// the rules config are not bounded by them.
	MaxRequestLogLimit   int64
	MaxRequestPeriod     time.Duration
	MaxRequestStateBytes int64
	// GlobalShadowMode answers OK to every request that would be over its limit, counting it
	// in ratelimit_service_global_shadow_mode (envoyproxy/ratelimit's SHADOW_MODE).
	GlobalShadowMode bool
	// CountDenied decides as envoyproxy/ratelimit does: each descriptor on its own, and the
	// hits of a request over a limit are counted all the same (with the fixed_window default
	// algorithm, the peer's answers exactly). By default a request over one limit consumes
	// nothing (envoyproxy/ratelimit issue #427).
	CountDenied bool
	// GlobalQuotaMode puts every configured limit in quota mode (QUOTA_MODE): a request is
	// over its limit only when every one of its limited descriptors is.
	GlobalQuotaMode bool
	// InFlight says that the transport enforces the descriptors' max_in_flight (it sees each
	// request end: sluice proxy sets it). Otherwise rules with a max_in_flight are refused
	// at load and reload (config.Options.RefuseInFlight): the RLS protocol has no
	// request-finished signal, and a limit silently not enforced is worse than none.
	InFlight bool
}

// Engine is the descriptor engine: it decides requests against the rules in force, on the
// store, and tells its Observer what it decided. It has no listener and counts no metric: a
// transport (package server, package proxy) turns its requests into Requests, and an
// Observer (package server/rlsmetrics) keeps the series. Build it with New, release it with
// Close. An Engine is safe for concurrent use.
type Engine struct {
	cfg         Config
	log         *slog.Logger
	obs         Observer
	clock       sluice.Clock
	store       sluice.Store
	storeCloser io.Closer // the store it opened; nil for Config.Store
	limiter     *sluice.Limiter
	layered     *sluice.Limiter // limiter and per-instance limits (layered.go)
	localStore  io.Closer
	rules       atomic.Pointer[rules]
	applyMu     sync.Mutex    // one rules set built at a time (rules.go)
	built       func()        // tests: called when a rules set is built, before it is swapped in
	rulesIn     chan struct{} // closed when rules are first in force (source.go)
	rulesOnce   sync.Once
	source      RulesSource // nil for static rules
	sourceName  string
	storeLog    logthrottle.Throttle
	unknownOnce sync.Once // criticality.go
	fallback    *fallbackWatch
	readyCheck  readiness
	unknown     unknownDomains
	closeOnce   sync.Once

	maxDescriptors   int
	maxDescEntries   int
	maxKeyLen        int
	requestRules     requestRules
	globalShadow     bool
	globalQuota      bool
	defaultAlgorithm sluice.Algorithm
}

// New validates cfg, loads the rules and opens the store. Call Close to release what New
// acquired, and Run to follow the rules source.
func New(cfg Config) (*Engine, error) {
	e := &Engine{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, clock: cfg.Clock, rulesIn: make(chan struct{}),
		maxDescriptors: orDefault(cfg.MaxDescriptors, DefaultMaxDescriptors),
		maxDescEntries: orDefault(cfg.MaxDescriptorEntries, DefaultMaxDescriptorEntries),
		maxKeyLen:      orDefault(cfg.MaxKeyLength, sluice.DefaultMaxKeyLength),
		globalShadow:   cfg.GlobalShadowMode, globalQuota: cfg.GlobalQuotaMode,
		defaultAlgorithm: cfg.RulesOptions.DefaultAlgorithm}
	if !e.defaultAlgorithm.Valid() {
		e.defaultAlgorithm = sluice.AlgorithmSlidingWindow
	}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if e.obs == nil {
		e.obs = nopObserver{}
	}
	if e.clock == nil {
		e.clock = sluice.SystemClock{}
	}
	e.readyCheck.clock = e.clock
	rr, err := newRequestRules(cfg)
	if err != nil {
		return nil, err
	}
	e.requestRules = rr
	if err := e.loadRules(); err != nil {
		return nil, err
	}
	if err := e.openStore(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// loadRules sets up the rules source (a FileSource for RulesPath) and the first rules: the
// source's, else the static Rules, else none until the source delivers.
func (e *Engine) loadRules() error {
	if !e.cfg.InFlight {
		e.cfg.RulesOptions.RefuseInFlight = true
		if err := refuseInFlight(e.cfg.Rules); err != nil {
			return err
		}
	}
	if w, ok := e.cfg.GlobalStore.(interface{ WindowsOnly() bool }); ok && w.WindowsOnly() {
		e.cfg.RulesOptions.GlobalWindowsOnly = true
		if err := refuseGlobalNonWindows(e.cfg.Rules); err != nil {
			return err
		}
	}
	switch {
	case e.cfg.RulesPath != "":
		fs, err := NewFileSource(e.cfg.RulesPath, e.cfg.RulesOptions, e.cfg.ReloadInterval)
		if err != nil {
			e.obs.RulesRejected(true)
			return fmt.Errorf("rls: rules: %w", err)
		}
		e.source = fs
	case e.cfg.RulesSource != nil:
		e.source = e.cfg.RulesSource
	}
	first := e.cfg.Rules
	if e.source != nil {
		e.sourceName = sourceName(e.source)
		if fs, ok := e.source.(*FileSource); ok {
			fs.bind(e.applySourced, e.rejectSourced) // Reload before Run
		}
		if held, ok := e.source.(interface{ Rules() *config.Config }); ok {
			if first = held.Rules(); !e.cfg.InFlight {
				if err := refuseInFlight(first); err != nil {
					return err
				}
			}
		}
	}
	switch {
	case first != nil:
		e.setRules(first, true)
	case e.source != nil:
		e.rules.Store(e.pendingRules())
	default:
		return errors.New("rls: rules: set Config.RulesPath, Config.Rules or Config.RulesSource")
	}
	return nil
}

func (e *Engine) openStore() error {
	e.store = e.cfg.Store
	if e.store == nil {
		sc := e.cfg.StoreConfig
		if sc.Logger == nil {
			sc.Logger = e.log
		}
		if sc.Fallback != "" {
			e.fallback = watchFallback(&sc, sc.Fallback, e.log, e.clock, e.obs, e.fallbackError)
		}
		st, closer, err := store.Open(context.Background(), sc)
		if err != nil {
			return err
		}
		e.store, e.storeCloser = st, closer
	}
	if e.cfg.WrapStore != nil {
		e.store = e.cfg.WrapStore(e.store)
	}
	e.limiter = sluice.New(e.store)
	e.readyCheck.store = e.store
	return e.openLocal()
}

// Logger returns the engine's logger (Config.Logger, or one that discards).
func (e *Engine) Logger() *slog.Logger { return e.log }

// Rules returns the rules in force.
func (e *Engine) Rules() *config.Config { return e.rules.Load().cfg }

// Reload checks the rules files now (as the periodic poll does) and reports whether new
// rules were applied; an invalid change is an error and the previous rules stay. It needs a
// source that reloads on demand (a FileSource).
func (e *Engine) Reload() (bool, error) {
	r, ok := e.source.(interface{ Reload() (bool, error) })
	if !ok {
		return false, errors.New("rls: reload: no rules files to reload (static rules, or rules pushed by a RulesSource)")
	}
	return r.Reload()
}

// Run runs the rules source (a FileSource polls every Config.ReloadInterval) until ctx is
// done; it returns at once for static rules or a FileSource with a negative ReloadInterval.
func (e *Engine) Run(ctx context.Context) {
	if e.source != nil {
		e.source.Run(ctx, e.applySourced, e.rejectSourced)
	}
}

// Limiter returns the limiter of the engine's store: the transports that enforce max_in_flight
// (Config.InFlight) hold their slots in its store (sluice.NewLeases), under Verdict.Key.
func (e *Engine) Limiter() *sluice.Limiter { return e.limiter }

// Close releases what New acquired: the store it opened (flushing its decorators) and the
// per-instance store. It is safe to call more than once.
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		if e.storeCloser != nil {
			err = e.storeCloser.Close()
		}
		if e.localStore != nil {
			_ = e.localStore.Close()
		}
	})
	return err
}

package rls

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/config"
)

// ErrNoRules is the error of a decision taken before a RulesSource delivered its first rules
// (KindUnavailable: Envoy applies its failure mode, never an OK it did not earn).
var ErrNoRules = errors.New("rls: no rules yet: waiting for the first rules from the rules source")

// RulesSource is the one way rules reach an Engine, as envoyproxy/ratelimit's config
// providers: rules files (FileSource, what Config.RulesPath builds) or a server that pushes
// them (package config/xds). Run calls apply with every new valid Config and reject with the
// error of every refused update (the rules in force then stay), until ctx is done. apply and
// reject are the engine's hooks: metrics, log lines and the swap of the rules set.
//
// A source that holds rules before Run (FileSource) also has a method Rules() *config.Config:
// the engine starts with them. Otherwise, until the source delivers, the engine decides
// under Config.Rules or, without them, not at all (ErrNoRules).
type RulesSource interface {
	Run(ctx context.Context, apply func(*config.Config), reject func(error))
}

// FileSource is the RulesSource of a rules file or directory: NewFileSource loads the rules,
// Run polls the files (config.Watcher: their names and contents hashed, so it works on every
// file system, Kubernetes' swapped ConfigMap volumes included) and delivers each valid
// change; Reload looks at once. A FileSource is safe for concurrent use; it feeds one engine.
type FileSource struct {
	path     string
	interval time.Duration
	w        *config.Watcher

	mu     sync.Mutex
	apply  func(*config.Config)
	reject func(error)
}

// NewFileSource loads the rules at path with o (config.LoadWith) and returns their source,
// polled every interval by Run (config.DefaultWatchInterval when 0; negative: Run does not
// poll, Reload still looks). An error names the file and the problems.
func NewFileSource(path string, o config.Options, interval time.Duration) (*FileSource, error) {
	s := &FileSource{path: path, interval: interval}
	w, err := config.NewWatcherWith(path, o, s.applied, s.rejected)
	if err != nil {
		return nil, err
	}
	s.w = w
	return s, nil
}

// Rules returns the rules in force from the files: the last valid ones.
func (s *FileSource) Rules() *config.Config { return s.w.Config() }

// String returns the path of the rules, the name of the source in log lines.
func (s *FileSource) String() string { return s.path }

// Reload looks at the files now, as the periodic poll does, and reports whether new rules
// were delivered; an invalid change is an error (delivered to reject) and the previous rules
// stay.
func (s *FileSource) Reload() (bool, error) { return s.w.Reload() }

// Run delivers the changes of the files to apply and reject, polling until ctx is done; it
// returns at once with a negative interval.
func (s *FileSource) Run(ctx context.Context, apply func(*config.Config), reject func(error)) {
	s.bind(apply, reject)
	if s.interval >= 0 {
		s.w.Run(ctx, s.interval)
	}
}

// bind makes apply and reject the hooks of the changes found from now on (by Run or Reload).
func (s *FileSource) bind(apply func(*config.Config), reject func(error)) {
	s.mu.Lock()
	s.apply, s.reject = apply, reject
	s.mu.Unlock()
}

func (s *FileSource) applied(c *config.Config) {
	s.mu.Lock()
	apply := s.apply
	s.mu.Unlock()
	if apply != nil {
		apply(c)
	}
}

func (s *FileSource) rejected(err error) {
	s.mu.Lock()
	reject := s.reject
	s.mu.Unlock()
	if reject != nil {
		reject(err)
	}
}

// sourceName names a source in log lines: a FileSource's path, else "rules source".
func sourceName(s RulesSource) string {
	if n, ok := s.(fmt.Stringer); ok {
		return n.String()
	}
	return "rules source"
}

// pendingRules is the rules set in force until a RulesSource delivers: no domain, and every
// decision an error.
func (e *Engine) pendingRules() *rules {
	r := e.compileRules(&config.Config{})
	r.pending = true
	return r
}

// applySourced makes cfg, delivered by the source, the rules in force, unless it has a
// max_in_flight this engine cannot enforce (then it is rejected).
func (e *Engine) applySourced(cfg *config.Config) {
	if !e.cfg.InFlight {
		if err := refuseInFlight(cfg); err != nil {
			e.rejectSourced(err)
			return
		}
	}
	e.applyMu.Lock()
	e.setRules(cfg, false)
	e.applyMu.Unlock()
	e.log.Info("rules reloaded", "source", e.sourceName, "domains", cfg.Domains(), "limits", len(cfg.Limits()))
}

// rejectSourced counts and logs a refused update of the source.
func (e *Engine) rejectSourced(err error) {
	e.obs.RulesRejected(false)
	e.log.Error("rules reload rejected; the previous rules keep serving", "source", e.sourceName, "err", err)
}

// HasRules reports whether rules are in force: false only while a RulesSource has not yet
// delivered its first rules.
func (e *Engine) HasRules() bool { return !e.rules.Load().pending }

// RulesReady reports whether the engine may be reported healthy as to its rules: rules are in
// force, or Config.ReadyWithoutRules.
func (e *Engine) RulesReady() bool { return e.cfg.ReadyWithoutRules || e.HasRules() }

// RulesIn is closed when rules are first in force: at once for rules files and static rules,
// at the first delivery of a RulesSource.
func (e *Engine) RulesIn() <-chan struct{} { return e.rulesIn }

package rls

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/config"
)

// ErrNoRules is the error of a decision taken before a RulesSource delivered its first rules
// (KindUnavailable: Envoy applies its failure mode, never an OK it did not earn).
var ErrNoRules = errors.New("rls: no rules yet: waiting for the first rules from the rules source")

// RulesSource delivers rules pushed from elsewhere, e.g. an xDS server (package config/xds).
// Run calls apply with every new valid Config and reject with the error of every refused
// update (the rules in force then stay), until ctx is done. apply and reject are the same
// hooks a rules file's reload goes through: metrics, log lines and the swap of the snapshot.
type RulesSource interface {
	Run(ctx context.Context, apply func(*config.Config), reject func(error))
}

// pendingRules is the snapshot in force until a RulesSource delivers: no domain, and every
// decision an error.
func (e *Engine) pendingRules() *rules {
	r := e.compileRules(&config.Config{})
	r.pending = true
	return r
}

// applyReloaded makes cfg, reloaded from source, the rules in force.
func (e *Engine) applyReloaded(source string, cfg *config.Config) {
	e.setRules(cfg)
	e.metrics.reloads.WithLabelValues("success").Inc()
	e.log.Info("rules reloaded", "source", source, "domains", cfg.Domains(), "limits", len(cfg.Limits()))
}

// rejectReload counts and logs a refused reload from source.
func (e *Engine) rejectReload(source string, err error) {
	e.metrics.reloads.WithLabelValues("failure").Inc()
	e.peer.configLoadError.Inc()
	e.log.Error("rules reload rejected; the previous rules keep serving", "source", source, "err", err)
}

// runSource runs Config.RulesSource until ctx is done.
func (e *Engine) runSource(ctx context.Context) {
	e.cfg.RulesSource.Run(ctx,
		func(c *config.Config) { e.applyReloaded("rules source", c) },
		func(err error) { e.rejectReload("rules source", err) })
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

package config

import "github.com/sluicehq/sluice"

// The values of RateLimit.Scope.
const (
	// ScopeCluster is a limit shared by every instance, on the store (the default).
	ScopeCluster = "cluster"
	// ScopeLocal is a limit of each instance on its own, in its memory: the last guard of
	// one instance against overload, next to the cluster's business quota. A descriptor
	// with both decides them all or nothing (sluice.Limiter.AllowAll): a request is admitted
	// only when every limit admits it, and a denied request consumes from none.
	ScopeLocal = "local"
	// ScopeGlobal is a limit of the whole fleet in every region: decided on each region's
	// own store, its budget shared between the regions the service is configured with
	// (package distributed/regions: escrow or async). Without regions configured, the
	// cluster's store is the one region, and a global limit is a cluster limit.
	ScopeGlobal = "global"
)

// compileScope checks the rate limit's scope and returns it ("" for the cluster's).
func (d *Document) compileScope(p *problems, rl *RateLimit, f string) (scope string, ok bool) {
	switch rl.Scope {
	case "", ScopeCluster:
		return "", true
	case ScopeLocal, ScopeGlobal:
		return rl.Scope, true
	}
	p.add(d.File, rl.line, f+".scope", "want %s, %s or %s, got %q", ScopeCluster, ScopeLocal, ScopeGlobal, rl.Scope)
	return "", false
}

// addScope records the scope of the rule just appended to l.Rules.
func (l *Limit) addScope(scope string) {
	l.Local = addFlag(l.Local, len(l.Rules), scope == ScopeLocal)
	l.Global = addFlag(l.Global, len(l.Rules), scope == ScopeGlobal)
}

// addFlag appends on as the n-th flag of flags, which stays nil while every flag is off.
func addFlag(flags []bool, n int, on bool) []bool {
	if on && flags == nil {
		flags = make([]bool, n)
	}
	if flags != nil {
		flags = append(flags, on)
	}
	return flags
}

// IsLocal reports whether the i-th rule is a per-instance limit (see Limit.Local).
func (l *Limit) IsLocal(i int) bool { return i < len(l.Local) && l.Local[i] }

// CountsWindows reports whether rule is counted in windows (fixed_window, sliding_window),
// as the regions' async mode needs a global limit to be (Options.GlobalWindowsOnly).
func CountsWindows(rule sluice.Rule) bool {
	return rule.Algorithm == sluice.AlgorithmFixedWindow || rule.Algorithm == sluice.AlgorithmSlidingWindow
}

// IsGlobal reports whether the i-th rule is a limit of every region (see Limit.Global).
func (l *Limit) IsGlobal(i int) bool { return i < len(l.Global) && l.Global[i] }

package config

// The values of RateLimit.Scope.
const (
	// ScopeCluster is a limit shared by every instance, on the store (the default).
	ScopeCluster = "cluster"
	// ScopeLocal is a limit of each instance on its own, in its memory: the last guard of
	// one instance against overload, next to the cluster's business quota. A descriptor
	// with both decides them all or nothing (sluice.Limiter.AllowAll): a request is admitted
	// only when every limit admits it, and a denied request consumes from none.
	ScopeLocal = "local"
)

// compileScope checks the rate limit's scope and reports whether it is local.
func (d *Document) compileScope(p *problems, rl *RateLimit, f string) (local, ok bool) {
	switch rl.Scope {
	case "", ScopeCluster:
		return false, true
	case ScopeLocal:
		return true, true
	}
	p.add(d.File, rl.line, f+".scope", "want %s or %s, got %q", ScopeCluster, ScopeLocal, rl.Scope)
	return false, false
}

// addScope records the scope of the rule just appended to l.Rules.
func (l *Limit) addScope(local bool) {
	if local && l.Local == nil {
		l.Local = make([]bool, len(l.Rules))
	}
	if l.Local != nil {
		l.Local = append(l.Local, local)
	}
}

// IsLocal reports whether the i-th rule is a per-instance limit (see Limit.Local).
func (l *Limit) IsLocal(i int) bool { return i < len(l.Local) && l.Local[i] }

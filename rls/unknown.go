package rls

import "sync"

// maxUnknownDomains bounds the unknown domains remembered so that each is logged once.
const maxUnknownDomains = 1024

// unknownDomains remembers the unknown domains already logged.
type unknownDomains struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// unknownDomain counts a request in a domain the rules do not define and logs the domain the
// first time (the first maxUnknownDomains domains; then nothing more is logged).
func (e *Engine) unknownDomain(domain string) {
	e.obs.UnknownDomain()
	u := &e.unknown
	u.mu.Lock()
	_, seen := u.seen[domain]
	full := len(u.seen) >= maxUnknownDomains
	if !seen && !full {
		if u.seen == nil {
			u.seen = make(map[string]struct{})
		}
		u.seen[domain] = struct{}{}
	}
	u.mu.Unlock()
	if !seen && !full {
		e.log.Warn("request for a domain no rules define: answered OK with no limits (logged once per domain)",
			"domain", quote(domain), "configured", e.Rules().Domains())
	}
}

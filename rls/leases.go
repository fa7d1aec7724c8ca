package rls

import "github.com/sluicehq/sluice/config"

// InFlightKey returns the store key the slots of a descriptor's max_in_flight are held under
// (Verdict.Key, as Decide gives it to the transports that hold them), for the descriptor of
// domain with entries: an operator clearing the leases of a key names the descriptor, not its
// key. The error (KindInvalid) says when the request is malformed or no limit with a
// max_in_flight matches it.
func (e *Engine) InFlightKey(domain string, entries []Entry) (string, error) {
	req := &Request{Domain: domain, Descriptors: []Descriptor{{Entries: entries}}}
	st := e.rules.Load()
	dom, err := e.validate(st, req)
	if err != nil {
		return "", err
	}
	if dom == nil {
		return "", invalid("domain %s: not in the rules", quote(domain))
	}
	shared := make([]string, len(entries))
	lim := config.LookupShared(dom, entries, shared)
	if lim == nil || lim.InFlight == nil {
		return "", invalid("descriptor: no limit with a max_in_flight matches it in domain %s", quote(domain))
	}
	return descriptorKey(domain, entries, shared), nil
}

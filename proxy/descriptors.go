package proxy

import (
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/gate"
	"github.com/sluicehq/sluice/rls"
)

// Request is what the actions of a proxy section read of a request: sluice proxy reads them
// from the live *http.Request, package replay from a line of an access log (the interface is
// package internal/gate's, where sluice proxy's decision lives).
type Request = gate.Fields

// Descriptors returns the descriptors of r under the rate limits of d's proxy section, in
// order, built in *buf (whose elements, and their Entries, keep their capacity from call to
// call). A rate limit whose action cannot append its entry produces no descriptor (Envoy's
// rule). This is how sluice proxy builds a request's descriptors (gate.Descriptors), and how
// package replay builds a logged one's.
func Descriptors(buf *[]rls.Descriptor, d *config.Domain, r Request) []rls.Descriptor {
	return gate.Descriptors(buf, d, r)
}

// Domains returns the domains of cfg that have a proxy section, in name order: those a
// request is decided in, one after the other, until one denies it.
func Domains(cfg *config.Config) []*config.Domain { return gate.Domains(cfg) }

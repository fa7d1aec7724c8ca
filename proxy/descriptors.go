package proxy

import (
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/rls"
)

// plan is what the proxy does under one rules config: the domains that have a proxy
// section, with their rate limits. It is immutable.
type plan struct {
	cfg     *config.Config
	domains []*config.Domain
}

// currentPlan returns the plan of the rules in force, building it after a reload.
func (p *Proxy) currentPlan() *plan {
	cfg := p.eng.Rules()
	if pl := p.plan.Load(); pl != nil && pl.cfg == cfg {
		return pl
	}
	pl := &plan{cfg: cfg, domains: Domains(cfg)}
	if len(pl.domains) == 0 {
		p.log.Warn("no document of the rules has a proxy section: every request is forwarded unlimited")
	}
	p.plan.Store(pl)
	return pl
}

// Domains returns the domains of cfg that have a proxy section, in name order: those a
// request is decided in, one after the other, until one denies it.
func Domains(cfg *config.Config) []*config.Domain {
	var out []*config.Domain
	for _, name := range cfg.Domains() {
		if d := cfg.Domain(name); len(d.Proxy) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func (pl *plan) empty() bool { return len(pl.domains) == 0 }

func (pl *plan) domainNames() []string {
	names := make([]string, len(pl.domains))
	for i, d := range pl.domains {
		names[i] = d.Name
	}
	return names
}

// scratch is the per-request state of a decision, pooled: the engine's request built from
// the HTTP request, and the answer and results of the decision.
type scratch struct {
	req     rls.Request
	descs   []rls.Descriptor // each keeps its Entries' capacity
	ans     rls.Answer
	results []httplimit.Result
	claims  []inflight.Claim // the in-flight limits of the descriptors (max_in_flight)
	http    httpRequest      // what the actions read of the request
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func (sc *scratch) release() {
	for i := range sc.descs {
		d := &sc.descs[i]
		clear(d.Entries)
		d.Entries = d.Entries[:0]
	}
	clear(sc.ans.Verdicts)
	clear(sc.results)
	sc.req, sc.ans.Verdicts, sc.ans.Rules = rls.Request{}, sc.ans.Verdicts[:0], nil
	sc.results = sc.results[:0]
	clear(sc.claims)
	sc.claims = sc.claims[:0]
	sc.http = httpRequest{}
	scratchPool.Put(sc)
}

// descriptors sets sc.req to the descriptors of r under the domain's rate limits, and
// reports whether there is any (see Descriptors).
func (p *Proxy) descriptors(sc *scratch, r *http.Request, d *config.Domain) bool {
	if sc.http.r != r {
		sc.http = httpRequest{r: r, resolver: p.resolver}
	}
	sc.req.Domain, sc.req.Descriptors = d.Name, Descriptors(&sc.descs, d, &sc.http)
	return len(sc.req.Descriptors) > 0
}

// Request is what the actions of a proxy section read of a request. sluice proxy reads them
// from the live *http.Request; package replay from a line of an access log.
type Request interface {
	// Header returns the first value of a request header, or of a pseudo-header: ":path" is
	// the path and query as sent, ":method" the method, ":authority" (and "Host") the host,
	// ":scheme" http or https. False when absent.
	Header(name string) (string, bool)
	// Method is the request's method.
	Method() string
	// Path is the request's URL path, as sent (not cleaned).
	Path() string
	// Client is the client address, past the trusted proxies; the zero Addr when unknown.
	Client() netip.Addr
}

// Descriptors returns the descriptors of r under the rate limits of d's proxy section, in
// order, built in *buf (whose elements, and their Entries, keep their capacity from call to
// call: pass the same buffer to build without allocating). A rate limit whose action cannot
// append its entry produces no descriptor (Envoy's rule), and one whose entries were all
// skipped neither. This is how sluice proxy builds a request's descriptors, and how package
// replay builds a logged one's.
func Descriptors(buf *[]rls.Descriptor, d *config.Domain, r Request) []rls.Descriptor {
	descs := *buf
	n := 0
	for i := range d.Proxy {
		if n == len(descs) {
			descs = append(descs, rls.Descriptor{})
		}
		desc := &descs[n]
		desc.Entries = desc.Entries[:0]
		if appendEntries(desc, r, d.Proxy[i].Actions) && len(desc.Entries) > 0 {
			n++
		}
	}
	*buf = descs
	return descs[:n]
}

// appendEntries appends the entry of each action to desc; false when an action cannot.
func appendEntries(desc *rls.Descriptor, r Request, actions []config.Action) bool {
	for i := range actions {
		a := &actions[i]
		v, ok := actionValue(r, a)
		if !ok {
			if a.RequestHeaders != nil && a.RequestHeaders.SkipIfAbsent {
				continue
			}
			return false
		}
		desc.Entries = append(desc.Entries, rls.Entry{Key: a.Key(), Value: v})
	}
	return true
}

// actionValue is the value of the entry an action appends for r, or false when it appends
// none.
func actionValue(r Request, a *config.Action) (string, bool) {
	switch {
	case a.RequestHeaders != nil:
		return r.Header(a.RequestHeaders.HeaderName)
	case a.RemoteAddress != nil:
		client := r.Client()
		if !client.IsValid() {
			return "", false
		}
		var buf [64]byte // an IPv6 /64 key is at most 24 bytes
		return string(clientip.AppendKey(buf[:0], client, a.RemoteAddress.IPv6Prefix)), true
	case a.GenericKey != nil:
		return a.GenericKey.DescriptorValue, true
	case a.HeaderValueMatch != nil:
		hv := a.HeaderValueMatch
		return hv.DescriptorValue, hv.Matches(r.Header)
	case a.Path != nil:
		clean := cleanPath(r.Path())
		if len(a.Path.Prefixes) == 0 {
			return clean, true
		}
		return a.Path.Route(clean)
	case a.Method != nil:
		return r.Method(), true
	}
	return "", false
}

// cleanPath is path.Clean, keeping the path as it is when already clean (no allocation).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if c := path.Clean(p); c != p {
		return c
	}
	return p
}

// httpRequest is a Request over a live HTTP request, its client resolved once.
type httpRequest struct {
	r        *http.Request
	resolver *clientip.Resolver
	client   netip.Addr
	resolved bool
}

func (h *httpRequest) Header(name string) (string, bool) { return headerValue(h.r, name) }
func (h *httpRequest) Method() string                    { return h.r.Method }
func (h *httpRequest) Path() string                      { return h.r.URL.Path }

func (h *httpRequest) Client() netip.Addr {
	if !h.resolved {
		h.client, h.resolved = h.resolver.FromRequest(h.r), true
	}
	return h.client
}

// headerValue returns the first value of a request header, or of a pseudo-header (":path"
// is the path and query as sent, ":authority" and "Host" the request's host).
func headerValue(r *http.Request, name string) (string, bool) {
	switch {
	case name == ":path":
		return r.URL.RequestURI(), true
	case name == ":method":
		return r.Method, true
	case name == ":authority" || strings.EqualFold(name, "host"):
		return r.Host, r.Host != ""
	case name == ":scheme":
		if r.TLS != nil {
			return "https", true
		}
		return "http", true
	}
	vs := r.Header.Values(name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

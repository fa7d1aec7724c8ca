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
	pl := &plan{cfg: cfg}
	for _, name := range cfg.Domains() {
		if d := cfg.Domain(name); len(d.Proxy) > 0 {
			pl.domains = append(pl.domains, d)
		}
	}
	if len(pl.domains) == 0 {
		p.log.Warn("no document of the rules has a proxy section: every request is forwarded unlimited")
	}
	p.plan.Store(pl)
	return pl
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

	client     netip.Addr
	clientDone bool
	buf        []byte
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
	sc.client, sc.clientDone = netip.Addr{}, false
	scratchPool.Put(sc)
}

// descriptors sets sc.req to the descriptors of r under the domain's rate limits, and
// reports whether there is any: a rate limit whose action cannot append its entry produces
// no descriptor (Envoy's rule), and one whose entries were all skipped neither.
func (p *Proxy) descriptors(sc *scratch, r *http.Request, d *config.Domain) bool {
	n := 0
	for i := range d.Proxy {
		if n == len(sc.descs) {
			sc.descs = append(sc.descs, rls.Descriptor{})
		}
		desc := &sc.descs[n]
		desc.Entries = desc.Entries[:0]
		if p.appendEntries(sc, desc, r, d.Proxy[i].Actions) && len(desc.Entries) > 0 {
			n++
		}
	}
	sc.req.Domain, sc.req.Descriptors = d.Name, sc.descs[:n]
	return n > 0
}

// appendEntries appends the entry of each action to desc; false when an action cannot.
func (p *Proxy) appendEntries(sc *scratch, desc *rls.Descriptor, r *http.Request, actions []config.Action) bool {
	for i := range actions {
		a := &actions[i]
		v, ok := p.actionValue(sc, r, a)
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
func (p *Proxy) actionValue(sc *scratch, r *http.Request, a *config.Action) (string, bool) {
	switch {
	case a.RequestHeaders != nil:
		return headerValue(r, a.RequestHeaders.HeaderName)
	case a.RemoteAddress != nil:
		if !sc.clientDone {
			sc.client, sc.clientDone = p.resolver.FromRequest(r), true
		}
		if !sc.client.IsValid() {
			return "", false
		}
		sc.buf = clientip.AppendKey(sc.buf[:0], sc.client, a.RemoteAddress.IPv6Prefix)
		return string(sc.buf), true
	case a.GenericKey != nil:
		return a.GenericKey.DescriptorValue, true
	case a.HeaderValueMatch != nil:
		hv := a.HeaderValueMatch
		return hv.DescriptorValue, hv.Matches(func(name string) (string, bool) { return headerValue(r, name) })
	case a.Path != nil:
		clean := cleanPath(r.URL.Path)
		if len(a.Path.Prefixes) == 0 {
			return clean, true
		}
		return a.Path.Route(clean)
	case a.Method != nil:
		return r.Method, true
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

package gate

import (
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/rls"
)

// plan is what the gate decides under one rules config: the domains that have a proxy
// section, with their rate limits. It is immutable.
type plan struct {
	cfg     *config.Config
	domains []*config.Domain
}

// currentPlan returns the plan of the rules in force, building it after a reload.
func (g *Gate) currentPlan() *plan {
	cfg := g.eng.Rules()
	if pl := g.plan.Load(); pl != nil && pl.cfg == cfg {
		return pl
	}
	pl := &plan{cfg: cfg, domains: Domains(cfg)}
	if len(pl.domains) == 0 {
		g.log.Warn("no document of the rules has a proxy section: no request is limited")
	}
	g.plan.Store(pl)
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

// DomainNames returns the names of the domains of the rules in force that have a proxy
// section.
func (g *Gate) DomainNames() []string {
	pl := g.currentPlan()
	names := make([]string, len(pl.domains))
	for i, d := range pl.domains {
		names[i] = d.Name
	}
	return names
}

// Scratch is the state of one decision, pooled (Get, Release): the engine's request built
// from the Request, and the answer and outcome of the decision.
type Scratch struct {
	// Request is the request to decide, filled by the door.
	Request Request
	// Extra, when not empty, are the entries of one more descriptor decided with those of
	// the proxy actions in each domain (ext_authz's per-route context extensions).
	Extra []rls.Entry
	// Results are the limits that applied to the request, for its headers and denial.
	Results []httplimit.Result
	// Claims are the in-flight limits of its descriptors (max_in_flight); after Pass, they
	// hold their slots until Done.
	Claims []inflight.Claim
	// Err is the error of Invalid and Unavailable.
	Err error

	fields  requestFields // what the actions read of Request
	req     rls.Request
	descs   []rls.Descriptor // each keeps its Entries' capacity
	ans     rls.Answer
	refused *inflight.Claim // the claim of Refused
	start   time.Time       // when the slots were taken

	budgets    []Budget       // Budgets' answer
	budgetDesc rls.Descriptor // a budget's entries, while its key is built
}

var scratchPool = sync.Pool{New: func() any { return &Scratch{} }}

// Get returns a Scratch from the pool.
func Get() *Scratch { return scratchPool.Get().(*Scratch) }

// Done gives back the in-flight slots a passed request holds, telling adaptive limits its
// round trip. It is safe to call when none is held, and more than once.
func (sc *Scratch) Done() {
	if len(sc.Claims) > 0 {
		inflight.Release(sc.Claims, time.Since(sc.start))
	}
}

// Release returns sc to the pool; sc must not be used after. It does not give back slots
// (Done does).
func (sc *Scratch) Release() {
	for i := range sc.descs {
		d := &sc.descs[i]
		clear(d.Entries)
		d.Entries = d.Entries[:0]
	}
	clear(sc.ans.Verdicts)
	clear(sc.Results)
	sc.req, sc.ans.Verdicts, sc.ans.Rules = rls.Request{}, sc.ans.Verdicts[:0], nil
	sc.Results = sc.Results[:0]
	clear(sc.Claims)
	sc.Claims = sc.Claims[:0]
	clear(sc.Extra)
	clear(sc.budgets)
	clear(sc.budgetDesc.Entries)
	sc.budgets, sc.budgetDesc.Entries = sc.budgets[:0], sc.budgetDesc.Entries[:0]
	sc.Request, sc.Extra, sc.Err, sc.refused, sc.fields = Request{}, sc.Extra[:0], nil, nil, requestFields{}
	scratchPool.Put(sc)
}

// descriptors sets sc.req to the descriptors of sc's request under the domain's rate limits,
// then those of sc.Extra, and reports whether there is any (see Descriptors).
func (g *Gate) descriptors(sc *Scratch, d *config.Domain) bool {
	if sc.fields.r != &sc.Request {
		sc.fields = requestFields{r: &sc.Request, resolver: g.resolver}
	}
	descs := Descriptors(&sc.descs, d, &sc.fields)
	if len(sc.Extra) > 0 {
		n := len(descs)
		if n == len(sc.descs) {
			sc.descs = append(sc.descs, rls.Descriptor{})
		}
		sc.descs[n].Entries = append(sc.descs[n].Entries[:0], sc.Extra...)
		descs = sc.descs[:n+1]
	}
	sc.req.Domain, sc.req.Descriptors = d.Name, descs
	return len(descs) > 0
}

// Fields is what the actions of a proxy section read of a request: sluice proxy and the
// doors read them from a Request (requestFields), package replay from a line of an access
// log.
type Fields interface {
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
// skipped neither. This is how sluice proxy and the doors build a request's descriptors, and
// how package replay builds a logged one's.
func Descriptors(buf *[]rls.Descriptor, d *config.Domain, r Fields) []rls.Descriptor {
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
func appendEntries(desc *rls.Descriptor, r Fields, actions []config.Action) bool {
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
func actionValue(r Fields, a *config.Action) (string, bool) {
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

// requestFields are the Fields of a Request, its client resolved once.
type requestFields struct {
	r        *Request
	resolver *clientip.Resolver
	client   netip.Addr
	resolved bool
}

func (f *requestFields) Header(name string) (string, bool) { return headerValue(f.r, name) }
func (f *requestFields) Method() string                    { return f.r.Method }
func (f *requestFields) Path() string                      { return f.r.URL.Path }

func (f *requestFields) Client() netip.Addr {
	if !f.resolved {
		f.client, f.resolved = f.resolver.Resolve(f.r.RemoteAddr, f.r.XForwardedFor, f.r.Forwarded), true
	}
	return f.client
}

// headerValue returns the first value of a request header, or of a pseudo-header (":path"
// is the path and query as sent, ":authority" and "Host" the request's host).
func headerValue(r *Request, name string) (string, bool) {
	switch {
	case name == ":path":
		return r.URL.RequestURI(), true
	case name == ":method":
		return r.Method, true
	case name == ":authority" || strings.EqualFold(name, "host"):
		return r.Host, r.Host != ""
	case name == ":scheme":
		if r.TLS {
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

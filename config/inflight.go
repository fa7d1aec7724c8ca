package config

import (
	"errors"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
)

// MaxInFlight (YAML `max_in_flight`, Sluice) is a descriptor's concurrency limit: at most
// Limit requests of one counter key in flight at once across the fleet, each holding a lease
// that its holder renews while the request runs, so a holder that dies frees its slot within
// Lease. A request holds its slot until its response is done. Only the transports that see a
// request end enforce it (sluice proxy, httplimit, grpclimit); sluice serve's RLS refuses it,
// as the RLS protocol has no request-finished signal (Options.RefuseInFlight).
//
// `max_in_flight: 10` is short for `max_in_flight: {limit: 10}`.
type MaxInFlight struct {
	// Limit is the most requests in flight at once, 1 to sluice.MaxLimit. Exclusive with
	// Adaptive.
	Limit int64 `yaml:"limit"`
	// Lease is how long a slot stays held without renewal (a Go duration; default the
	// library's sluice.DefaultLease).
	Lease string `yaml:"lease"`
	// Adaptive makes the limit follow the backend's latency (package adaptive) between its
	// floor and ceiling, instead of a fixed Limit.
	Adaptive *AdaptiveLimit `yaml:"adaptive"`
	line     int
}

// AdaptiveLimit is the YAML form of adaptive.Settings; every zero field is the package's
// default.
type AdaptiveLimit struct {
	Floor       int     `yaml:"floor"`
	Ceiling     int     `yaml:"ceiling"`
	Initial     int     `yaml:"initial"`
	ShortWindow int     `yaml:"short_window"`
	LongWindow  int     `yaml:"long_window"`
	Tolerance   float64 `yaml:"tolerance"`
	Smoothing   float64 `yaml:"smoothing"`
	Queue       int     `yaml:"queue"`
	line        int
}

// Settings returns the adaptive.Settings of a.
func (a *AdaptiveLimit) Settings() adaptive.Settings {
	return adaptive.Settings{Floor: a.Floor, Ceiling: a.Ceiling, Initial: a.Initial, ShortWindow: a.ShortWindow,
		LongWindow: a.LongWindow, Tolerance: a.Tolerance, Smoothing: a.Smoothing, Queue: a.Queue}
}

func (*MaxInFlight) scalarForm() {}

// UnmarshalYAML implements yaml.Unmarshaler: a mapping of known fields, or a bare limit.
func (m *MaxInFlight) UnmarshalYAML(n *yaml.Node) error {
	m.line = n.Line
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		if err := n.Decode(&m.Limit); err != nil || fraction(n) {
			m.Limit = 0
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("want a number of requests or a mapping (limit, lease, adaptive), got %q (a whole number: a fraction is never rounded)", n.Value)}}
		}
		return nil
	}
	type plain MaxInFlight
	return decodeFields(n, (*plain)(m))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *AdaptiveLimit) UnmarshalYAML(n *yaml.Node) error {
	type plain AdaptiveLimit
	a.line = n.Line
	return decodeFields(n, (*plain)(a))
}

// InFlightLimit is a descriptor's compiled max_in_flight (Limit.InFlight): plain data.
type InFlightLimit struct {
	// InFlight is the limit and the lease of each slot (0: sluice.DefaultLease); with
	// Adaptive, its Limit is the adaptive limit's ceiling.
	sluice.InFlight
	// Adaptive, when set, are the settings of the adaptive limit in force instead of Limit,
	// with every default filled in. The limit itself (an adaptive.Gradient, which learns
	// from each request's round trip) is runtime state: the engine that serves the rules
	// keeps one per limit, across reloads that keep the settings (rls.Verdict.Adaptive).
	Adaptive *adaptive.Settings
}

// compileInFlight checks a descriptor's max_in_flight and sets it on l, making l (a limit of
// no rate) when the descriptor has no rate limit; it returns l.
func (d *Document) compileInFlight(p *problems, o Options, desc *Descriptor, l *Limit, field, full string) *Limit {
	m := desc.MaxInFlight
	if m == nil {
		return l
	}
	f := field + ".max_in_flight"
	if o.RefuseInFlight {
		p.add(d.File, m.line, f, "not enforced here: the RLS protocol has no request-finished signal, so sluice serve cannot tell when a request ends; "+
			"sluice proxy and the httplimit and grpclimit middleware enforce max_in_flight (see docs/CONCURRENCY.md)")
		return l
	}
	if l != nil && l.Unlimited {
		p.add(d.File, m.line, f, "cannot be combined with an unlimited rate limit")
		return l
	}
	in, ok := d.compileMaxInFlight(p, o, m, f)
	if !ok {
		return l
	}
	if l == nil {
		l = &Limit{Domain: d.Domain, FullKey: full, Name: full, ShadowMode: desc.ShadowMode,
			DetailedMetric: desc.DetailedMetric, Metadata: desc.Metadata, File: d.File, Line: desc.line}
	}
	l.InFlight = in
	return l
}

// DefaultMaxLease is the longest lease a max_in_flight may ask for unless Options.MaxLease
// says otherwise: a holder killed without releasing locks its slot that long, so the bound is
// what an operator can wait out (sluice proxy --max-lease; the proxy's admin endpoint
// DELETE /v1/leases clears a key's leases at once).
const DefaultMaxLease = 10 * time.Minute

// maxLease returns the bound on leases of o: Options.MaxLease, DefaultMaxLease when 0, within
// sluice.MinLease and sluice.MaxLease.
func maxLease(o Options) time.Duration {
	if o.MaxLease == 0 {
		return DefaultMaxLease
	}
	return min(max(o.MaxLease, sluice.MinLease), sluice.MaxLease)
}

// compileMaxInFlight checks m (field f) and compiles it.
func (d *Document) compileMaxInFlight(p *problems, o Options, m *MaxInFlight, f string) (*InFlightLimit, bool) {
	in := &InFlightLimit{InFlight: sluice.InFlight{Limit: m.Limit}}
	ok := true
	if m.Lease != "" {
		lease, err := time.ParseDuration(m.Lease)
		switch {
		case err != nil:
			p.add(d.File, m.line, f+".lease", "not a duration like 10s or 1m: %q", m.Lease)
			ok = false
		case lease == 0:
			// The library reads a zero lease as its default; written here, it is a mistake.
			p.add(d.File, m.line, f+".lease", "must be between %v and %v, got %q (leave lease out for the default %v)",
				sluice.MinLease, maxLease(o), m.Lease, sluice.DefaultLease)
			ok = false
		}
		in.Lease = lease
	}
	if m.Adaptive != nil {
		if m.Limit != 0 {
			p.add(d.File, m.line, f+".limit", "exclusive with adaptive (set adaptive.ceiling)")
			return nil, false
		}
		g, err := adaptive.NewGradient(m.Adaptive.Settings())
		if err != nil {
			var se *adaptive.SettingsError
			for _, e := range unjoin(err) {
				if errors.As(e, &se) {
					p.add(d.File, m.Adaptive.line, f+".adaptive."+se.Field, "%s", se.Reason)
				}
			}
			return nil, false
		}
		settings := g.Settings()
		in.Adaptive, in.Limit = &settings, int64(settings.Ceiling)
	}
	if err := in.InFlight.Validate(); err != nil {
		p.addFieldError(d.File, m.line, f, err, "max_in_flight", "limit")
		return nil, false
	}
	if bound := maxLease(o); ok && in.LeaseTime() > bound {
		field, what := f+".lease", "lease "+in.Lease.String()
		if in.Lease == 0 {
			field, what = f, "the default lease "+sluice.DefaultLease.String()
		}
		p.add(d.File, m.line, field, "%s is longer than the %v a rule may ask for: a holder killed without releasing would lock its slot that long (the bound is --max-lease, at most %v)",
			what, bound, sluice.MaxLease)
		return nil, false
	}
	return in, ok
}

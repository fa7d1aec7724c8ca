package simulate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// Routing says which instance receives each request in a distributed mode.
type Routing string

// The routings.
const (
	// RoundRobin sends request i to instance i mod nodes.
	RoundRobin Routing = "round_robin"
	// Sticky sends every request of client c to instance c mod nodes.
	Sticky Routing = "sticky"
	// Skewed sends half the requests to instance 0 and spreads the rest evenly over all
	// instances at random (seeded): instance 0 sees 1/2 + 1/(2 x nodes) of the traffic.
	Skewed Routing = "skewed"
)

// ParseRouting returns the routing with the given name.
func ParseRouting(name string) (Routing, error) {
	switch r := Routing(name); r {
	case RoundRobin, Sticky, Skewed:
		return r, nil
	}
	return "", fmt.Errorf("simulate: routing: unknown %q (want round_robin, sticky or skewed)", name)
}

// Router picks the instance of each request in a distributed mode. It is not safe for
// concurrent use.
type Router struct {
	routing Routing
	nodes   int
	next    int
	rng     *rand.Rand
}

// NewRouter returns the router of r over nodes instances (skewed routing draws from seed).
func NewRouter(r Routing, nodes int, seed uint64) *Router {
	return &Router{routing: r, nodes: nodes, rng: rand.New(rand.NewPCG(seed, 0x70a7e))}
}

// Route returns the instance of the next request, from client's (sticky routing).
func (r *Router) Route(client int32) int {
	switch r.routing {
	case Sticky:
		return int(client) % r.nodes
	case Skewed:
		if r.rng.IntN(2) == 0 {
			return 0
		}
		return r.rng.IntN(r.nodes)
	}
	r.next++
	return (r.next - 1) % r.nodes
}

// BuildFunc builds the store instance node decides on, from the store shared by all instances
// and the run's virtual clock. Sync mode returns shared itself; decorators wrap it.
type BuildFunc func(shared sluice.Store, clock sluice.Clock, node int) (sluice.Store, error)

// Mode says how decisions are made. The zero Build is the single mode: one instance deciding
// on the algorithm states directly, the fastest way to measure an algorithm. Otherwise Nodes
// instances, each a sluice.Limiter over the store Build returns, share one memory store driven
// by the run's virtual clock, and Routing spreads the requests over them.
type Mode struct {
	// Name is the mode's table name, e.g. "sync" or "async_50ms".
	Name string
	// Build builds each instance's store; nil means the single mode.
	Build BuildFunc
	// Nodes is the number of instances (at least 1).
	Nodes int
	// Routing spreads requests over the instances (default RoundRobin).
	Routing Routing
	// SyncEvery, when positive, makes the harness call Sync on every instance store that
	// implements sluice.Syncer each time virtual time crosses a multiple of it, so decorators that
	// synchronise in the background do so deterministically in virtual time.
	SyncEvery time.Duration
	// ProbeEvery, when positive, makes the harness call Probe on every instance store that
	// implements sluice.Prober each time virtual time crosses a multiple of it, so a fallback probes
	// the store and sends heartbeats deterministically in virtual time.
	ProbeEvery time.Duration
	// Outage, when To > From, makes the shared store fail every call with
	// sluice.ErrStoreUnavailable over that part of the run; it answers again after To.
	Outage Outage
}

// Outage is the part of a run during which the shared store is down, as fractions of the
// run's duration: {From: 1.0/3, To: 2.0/3} is the middle third.
type Outage struct{ From, To float64 }

// Single is the single mode.
func Single() Mode { return Mode{Name: "single", Nodes: 1} }

// Sync returns the sync mode: nodes instances, each deciding on the shared store directly (one
// atomic store operation per decision).
func Sync(nodes int, routing Routing) Mode {
	return Mode{Name: "sync", Nodes: nodes, Routing: routing,
		Build: func(shared sluice.Store, _ sluice.Clock, _ int) (sluice.Store, error) { return shared, nil }}
}

func (m Mode) validate() error {
	switch {
	case m.Name == "":
		return fmt.Errorf("simulate: mode: empty name")
	case m.Nodes < 1 || m.Nodes > 1024:
		return fmt.Errorf("simulate: nodes: must be between 1 and 1024, got %d", m.Nodes)
	case m.Build == nil && m.Nodes != 1:
		return fmt.Errorf("simulate: nodes: the single mode has 1 instance, got %d", m.Nodes)
	case m.Outage.From < 0 || m.Outage.To > 1 || m.Outage.From > m.Outage.To:
		return fmt.Errorf("simulate: outage: must satisfy 0 <= from <= to <= 1, got %v..%v", m.Outage.From, m.Outage.To)
	case m.SyncEvery < 0:
		return fmt.Errorf("simulate: sync interval: negative (%v)", m.SyncEvery)
	case m.ProbeEvery < 0:
		return fmt.Errorf("simulate: probe interval: negative (%v)", m.ProbeEvery)
	}
	if m.Routing != "" {
		if _, err := ParseRouting(string(m.Routing)); err != nil {
			return err
		}
	}
	return nil
}

// outageStore fails every call with sluice.ErrStoreUnavailable while the clock is in
// [from, to).
type outageStore struct {
	sluice.Store
	clock    sluice.Clock
	from, to int64
}

// AddWindowCounts implements sluice.WindowCounter when the wrapped store does, failing as Take
// does during the outage.
func (s *outageStore) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	if s.down() {
		return fmt.Errorf("%w: simulated outage", sluice.ErrStoreUnavailable)
	}
	cs, ok := s.Store.(sluice.WindowCounter)
	if !ok {
		return fmt.Errorf("simulate: shared store %T is not a sluice.WindowCounter", s.Store)
	}
	return cs.AddWindowCounts(ctx, batch)
}

// Heartbeat implements sluice.Heartbeater when the wrapped store does, failing as Take
// does during the outage.
func (s *outageStore) Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (int, error) {
	if s.down() {
		return 0, fmt.Errorf("%w: simulated outage", sluice.ErrStoreUnavailable)
	}
	reg, ok := s.Store.(sluice.Heartbeater)
	if !ok {
		return 0, fmt.Errorf("simulate: shared store %T is not a sluice.Heartbeater", s.Store)
	}
	return reg.Heartbeat(ctx, group, instance, ttl)
}

// down reports whether the clock is in the outage.
func (s *outageStore) down() bool {
	now := s.clock.Now().UnixNano()
	return now >= s.from && now < s.to
}

func (s *outageStore) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if s.down() {
		return sluice.Decision{}, fmt.Errorf("%w: simulated outage", sluice.ErrStoreUnavailable)
	}
	return s.Store.Take(ctx, req)
}

// ParseModes builds the modes named in a comma-separated list: "single" once, and every
// distributed mode once per routing with the given number of nodes. See ModeNames.
func ParseModes(list string, nodes int, routings []Routing) ([]Mode, error) {
	if len(routings) == 0 {
		routings = []Routing{RoundRobin}
	}
	var out []Mode
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "single" {
			out = append(out, Single())
			continue
		}
		build, err := distributedMode(name)
		if err != nil {
			return nil, err
		}
		for _, r := range routings {
			m := build(nodes, r)
			if err := m.validate(); err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// ModeNames lists the mode names ParseModes accepts.
func ModeNames() []string {
	return []string{"single", "sync", "overlimit", "async_INTERVAL (e.g. async_50ms)", "quota_INTERVAL (e.g. quota_1s)", "fallback", "fallback_fail_open", "fallback_fail_closed"}
}

// distributedMode returns the constructor of the named distributed mode.
func distributedMode(name string) (func(nodes int, r Routing) Mode, error) {
	switch name {
	case "sync":
		return Sync, nil
	case "overlimit":
		return OverLimit, nil
	case "fallback":
		return func(nodes int, r Routing) Mode { return Fallback(nodes, r, distributed.FailLocal) }, nil
	case "fallback_fail_open":
		return func(nodes int, r Routing) Mode { return Fallback(nodes, r, distributed.FailOpen) }, nil
	case "fallback_fail_closed":
		return func(nodes int, r Routing) Mode { return Fallback(nodes, r, distributed.FailClosed) }, nil
	}
	if rest, ok := strings.CutPrefix(name, "quota_"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d >= time.Millisecond {
			return func(nodes int, r Routing) Mode { return Quota(nodes, r, d) }, nil
		}
		return nil, fmt.Errorf("simulate: modes: %q: the reporting interval must be a duration of at least 1ms, like quota_1s", name)
	}
	if rest, ok := strings.CutPrefix(name, "async_"); ok {
		d, err := time.ParseDuration(rest)
		if err == nil && d >= time.Millisecond {
			return func(nodes int, r Routing) Mode { return Async(nodes, r, d) }, nil
		}
		return nil, fmt.Errorf("simulate: modes: %q: the sync interval must be a duration of at least 1ms, like async_50ms", name)
	}
	return nil, fmt.Errorf("simulate: modes: unknown %q (want one of %s)", name, strings.Join(ModeNames(), ", "))
}

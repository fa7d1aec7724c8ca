package replay

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/proxy"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// sweepEvery is how often, in virtual time, the default memory store drops the keys back to
// full capacity (which changes no decision): the store holds the clients of the last minutes.
const sweepEvery = int64(time.Minute)

// replayer decides the requests of a log under one set of rules: the instances of the mode,
// each an rls.Engine on its store, on one virtual clock, and the figures of every rule.
type replayer struct {
	cfg     *Config
	rules   *config.Config
	domains []*config.Domain
	clock   *sluicetest.ManualClock
	engines []*rls.Engine
	stores  []sluice.Store
	shared  sluice.Store
	closer  io.Closer // releases shared
	mem     *memory.Store
	sweep   int64 // the next sweep of mem
	chores  *simulate.Chores
	router  *simulate.Router
	sticky  bool
	seed    maphash.Seed
	start   int64

	descs []rls.Descriptor
	req   rls.Request
	ans   rls.Answer
	stats [][]*ruleStats // by Limit.Index, then rule
	order []*ruleStats   // in the order first seen

	invalid, denied int64

	// rawOf, when set, is a value (Compare's client) to look for in the descriptors: raw says
	// whether a limit met by the request shows it raw (config.Limit.RawValues).
	rawOf string
	raw   bool
}

// newReplayer builds the store, the instances and their engines, starting at instant start.
func newReplayer(cfg *Config, rules *config.Config, start int64) (*replayer, error) {
	r := &replayer{cfg: cfg, rules: rules, domains: proxy.Domains(rules), start: start, seed: maphash.MakeSeed(),
		clock: sluicetest.NewManualClock(time.Unix(0, start).UTC()), stats: make([][]*ruleStats, len(rules.Limits()))}
	if len(r.domains) == 0 {
		return nil, errors.New("replay: rules: no document has a proxy section (proxy: rate_limits: [{actions: [...]}]): no request would become a descriptor")
	}
	var err error
	if cfg.Store != nil {
		r.shared, r.closer, err = cfg.Store(r.clock)
	} else {
		r.mem, err = memory.New(memory.WithClock(r.clock), memory.WithSweepInterval(-1))
		r.shared, r.closer = r.mem, r.mem
		r.sweep = start + sweepEvery
	}
	if err != nil {
		return nil, fmt.Errorf("replay: store: %w", err)
	}
	m := cfg.Mode
	for node := 0; node < m.Nodes; node++ {
		st, err := m.Build(r.shared, r.clock, node)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("replay: mode %s: node %d: %w", m.Name, node, err)
		}
		r.stores = append(r.stores, st)
		eng, err := rls.New(rls.Config{Rules: rules, Store: st, StoreConfig: store.Config{Backend: store.Backend{Clock: r.clock}},
			RequestRules: rls.RequestRulesOff, InFlight: true})
		if err != nil {
			r.close()
			return nil, fmt.Errorf("replay: %w", err)
		}
		r.engines = append(r.engines, eng)
	}
	r.chores = simulate.NewChores(m, r.clock, r.stores, start)
	r.router = simulate.NewRouter(m.Routing, m.Nodes, cfg.Seed)
	r.sticky = m.Routing == simulate.Sticky
	return r, nil
}

// decide decides one request at its instant, as sluice proxy decides a live one: in each
// domain with a proxy section in turn, until one denies it (later domains are not charged),
// and counts it in the figures of every rule it met. It reports whether it was denied.
func (r *replayer) decide(ctx context.Context, q *request, at, cost int64) (bool, error) {
	r.chores.RunUntil(ctx, at)
	if r.mem != nil && at >= r.sweep {
		r.mem.Sweep()
		r.sweep = at + sweepEvery
	}
	eng := r.engines[0]
	if len(r.engines) > 1 {
		var client int32
		if r.sticky {
			client = int32(maphash.String(r.seed, q.clientKey()) & math.MaxInt32)
		}
		eng = r.engines[r.router.Route(client)]
	}
	hits := uint32(min(cost, math.MaxUint32))
	for _, d := range r.domains {
		descs := proxy.Descriptors(&r.descs, d, q)
		if len(descs) == 0 {
			continue
		}
		r.req = rls.Request{Domain: d.Name, Descriptors: descs, HitsAddend: hits}
		if err := eng.Decide(ctx, &r.req, &r.ans); err != nil {
			if rls.KindOf(err) == rls.KindInvalid { // sluice proxy answers 400: not forwarded
				r.invalid++
				return true, nil
			}
			return false, fmt.Errorf("replay: store: %w", err)
		}
		r.observe(d.Name, descs, at, cost)
		if r.ans.Code == rls.CodeOverLimit {
			r.denied++
			return true, nil
		}
	}
	return false, nil
}

// observe counts the answer in the figures of each rule it met.
func (r *replayer) observe(domain string, descs []rls.Descriptor, at, n int64) {
	passed := r.ans.Code != rls.CodeOverLimit
	for i := range r.ans.Verdicts {
		v := &r.ans.Verdicts[i]
		if !v.Limited || v.Limit == nil {
			continue
		}
		l := v.Limit
		if r.rawOf != "" && !r.raw {
			for k, e := range descs[i].Entries {
				r.raw = r.raw || (e.Value == r.rawOf && k < len(l.RawValues) && l.RawValues[k])
			}
		}
		key := rls.CounterKey(r.rules, domain, descs[i].Entries)
		consumed := passed
		if v.Shadow || v.Quota { // decided on their own
			consumed = !v.Over
		}
		for j := range max(1, len(l.Rules)) {
			denied := v.Over
			if j < len(v.Decisions) {
				denied = !v.Decisions[j].Allowed
			}
			r.ruleStats(l, j).observe(key, at, n, denied || v.Block, consumed)
		}
	}
}

func (r *replayer) ruleStats(l *config.Limit, j int) *ruleStats {
	byRule := r.stats[l.Index]
	for len(byRule) <= j {
		byRule = append(byRule, nil)
	}
	r.stats[l.Index] = byRule
	if byRule[j] == nil {
		byRule[j] = newRuleStats(l, j, r.cfg, r.start)
		r.order = append(r.order, byRule[j])
	}
	return byRule[j]
}

// close releases the engines and the stores, flushing the decorators.
func (r *replayer) close() error {
	var errs []error
	for _, e := range r.engines {
		errs = append(errs, e.Close())
	}
	seen := map[sluice.Store]bool{r.shared: true}
	for _, st := range r.stores {
		if c, ok := st.(sluice.Closer); ok && !seen[st] {
			seen[st] = true
			errs = append(errs, c.Close())
		}
	}
	if r.closer != nil {
		errs = append(errs, r.closer.Close())
	}
	return errors.Join(errs...)
}

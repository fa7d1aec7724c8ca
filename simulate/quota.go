package simulate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
	"github.com/sluicehq/sluice/store/memory"
)

// Quota returns the quota mode: nodes instances, each spending locally (a memory store of
// its own) the share of every key's limit that a quota server assigns it, as package quota's
// client does. Every interval of virtual time each instance reports the requests it saw per
// key (allowed and denied) and gets its new share: the max-min fair split of the limit over
// the instances' demands averaged over one period of reports (at most 64; package
// quota/alloc, the RLQS server's allocation), with an assignment TTL of two intervals. Before its first assignment an instance decides under
// the limit divided by the number of instances. A share is enforced with the variant's own
// algorithm, its limit (and burst) scaled to the share.
func Quota(nodes int, routing Routing, interval time.Duration) Mode {
	var srv *quotaServer // one per run: node 0 creates it
	return Mode{Name: "quota_" + interval.String(), Nodes: nodes, Routing: routing, SyncEvery: interval,
		Build: func(_ sluice.Store, clock sluice.Clock, node int) (sluice.Store, error) {
			if node == 0 {
				srv = &quotaServer{nodes: nodes, interval: interval, keys: make(map[string]*quotaKey)}
			}
			local, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
			if err != nil {
				return nil, err
			}
			return &quotaNode{srv: srv, node: node, clock: clock, local: local}, nil
		}}
}

// quotaServer is the simulated quota server of one run, shared by its instances.
type quotaServer struct {
	nodes    int
	interval time.Duration
	keys     map[string]*quotaKey
	focus    string // the key whose shares are recorded
	history  []shareRecord

	fairErr   float64 // sum over rounds and keys of the fairness error
	fairCount int
}

// quotaKey is one key's bucket and what each instance holds and saw.
type quotaKey struct {
	bucket   alloc.Bucket
	settings alloc.Settings
	rule     sluice.Rule
	share    []int64
	expires  []int64 // 0: no assignment yet
	counts   []float64
	window   [][]float64 // per instance, the counts of the last rounds covering one period
}

// shareRecord is the focus key's shares at one round, and the max-min fair shares of the
// demands over the last period.
type shareRecord struct {
	at          int64
	share, fair []int64
}

func (s *quotaServer) key(k string, rule sluice.Rule) *quotaKey {
	q := s.keys[k]
	if q == nil {
		q = &quotaKey{rule: rule, share: make([]int64, s.nodes), expires: make([]int64, s.nodes),
			counts: make([]float64, s.nodes), window: make([][]float64, s.nodes)}
		q.settings = alloc.Settings{Limit: rule.Limit, Period: rule.Period, TTL: 2 * s.interval, History: s.rounds(rule)}
		s.keys[k] = q
	}
	return q
}

// report is instance node's report of every key at now; after the last instance's, the round
// is judged against the max-min fair split of the demands.
func (s *quotaServer) report(node int, now int64) {
	for _, q := range s.keys {
		c := q.counts[node]
		q.counts[node] = 0
		q.window[node] = append(q.window[node], c)
		if len(q.window[node]) > s.rounds(q.rule) {
			q.window[node] = q.window[node][1:]
		}
		if c == 0 && q.expires[node] == 0 {
			continue // never used on this instance
		}
		// Every instance is local to the one server: the shares changed by this report are
		// pushed to their instances at once, as the RLQS server does on their streams, and
		// delivered at once (what a shrink delivered frees goes out too).
		a, pushes := q.bucket.ReportPush(&q.settings, nodeID(node), sluice.Critical, now, c, s.interval, everyNode, nil)
		for _, p := range q.bucket.DeliverNow(&q.settings, now, nodeID(node), a, pushes, everyNode) {
			if i, ok := nodeOf(p.Client); ok {
				q.share[i], q.expires[i] = p.Share, p.Expires
			}
		}
	}
	if node == s.nodes-1 {
		s.judge(now)
	}
}

// rounds is how many reports cover one period of rule (1 to alloc's 64): the demand
// history, and the window of the fairness reference.
func (s *quotaServer) rounds(rule sluice.Rule) int {
	return int(min(max(int64(rule.Period/s.interval), 1), 64))
}

// judge adds the fairness error of every active key at this round: the share of the limit
// handed to the wrong instances, sum |share - fair| / (2 x limit), against the max-min fair
// split of the demands (requests per period) over the last period's rounds.
func (s *quotaServer) judge(now int64) {
	names := make([]string, 0, len(s.keys))
	for name := range s.keys {
		names = append(names, name)
	}
	sort.Strings(names) // a fixed order of summation: the same table for the same seed
	for _, name := range names {
		q := s.keys[name]
		var total float64
		perPeriod := make([]float64, s.nodes)
		for i, w := range q.window {
			var sum float64
			for _, c := range w {
				sum += c
			}
			if len(w) > 0 {
				perPeriod[i] = sum * float64(q.rule.Period) / (float64(s.interval) * float64(len(w)))
			}
			total += sum
		}
		if total == 0 {
			continue
		}
		fair := make([]int64, s.nodes)
		alloc.MaxMinFair(q.rule.Limit, perPeriod, fair)
		var diff int64
		for i := range fair {
			diff += abs(q.share[i] - fair[i])
		}
		s.fairErr += float64(diff) / float64(2*q.rule.Limit)
		s.fairCount++
		if name == s.focus {
			s.history = append(s.history, shareRecord{at: now, share: append([]int64(nil), q.share...), fair: fair})
		}
	}
}

// fairnessError is the mean fairness error over rounds and active keys.
func (s *quotaServer) fairnessError() float64 {
	if s.fairCount == 0 {
		return nan
	}
	return s.fairErr / float64(s.fairCount)
}

// sharesAt returns, per instance, the focus key's share and fair share in force at each
// instant of at.
func (s *quotaServer) sharesAt(at []int64) (shares, fair [][]int64) {
	shares, fair = make([][]int64, s.nodes), make([][]int64, s.nodes)
	j := -1
	for _, t := range at {
		for j+1 < len(s.history) && s.history[j+1].at <= t {
			j++
		}
		for n := 0; n < s.nodes; n++ {
			var sh, f int64
			if j >= 0 {
				sh, f = s.history[j].share[n], s.history[j].fair[n]
			}
			shares[n] = append(shares[n], sh)
			fair[n] = append(fair[n], f)
		}
	}
	return shares, fair
}

func nodeID(node int) string { return fmt.Sprint("node-", node) }

// nodeOf is the instance of a nodeID.
func nodeOf(id string) (int, bool) {
	var n int
	_, err := fmt.Sscanf(id, "node-%d", &n)
	return n, err == nil
}

// everyNode is the local of the simulated server: every instance is pushed.
func everyNode(string) bool { return true }

// quotaNode is one instance: it decides on its local store under its share.
type quotaNode struct {
	srv   *quotaServer
	node  int
	clock sluice.Clock
	local *memory.Store
}

func (n *quotaNode) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	q := n.srv.key(req.Key, req.Rule)
	share := q.rule.Limit / int64(n.srv.nodes) // no assignment yet: the limit / instances
	if exp := q.expires[n.node]; exp != 0 {
		share = 0 // expired (the simulated server never is): deny
		if n.clock.Now().UnixNano() < exp {
			share = q.share[n.node]
		}
	}
	if req.N > 0 {
		q.counts[n.node] += float64(req.N)
	}
	if share <= 0 {
		return sluice.Decision{Capacity: 0, RetryAfter: n.srv.interval}, nil
	}
	r := req
	r.Rule = scaleRule(req.Rule, share)
	return n.local.Take(ctx, r)
}

// scaleRule is rule with its limit, and burst, scaled to share.
func scaleRule(rule sluice.Rule, share int64) sluice.Rule {
	r := rule
	if r.Burst > 0 {
		r.Burst = max(1, r.Burst*share/r.Limit)
	}
	r.Limit = share
	return r
}

// Sync reports this instance's usage and takes its new shares.
func (n *quotaNode) Sync(context.Context) error {
	n.srv.report(n.node, n.clock.Now().UnixNano())
	return nil
}

// Close releases the local store.
func (n *quotaNode) Close() error { return n.local.Close() }

// quotaOf returns the quota server of a quota-mode decider, or nil.
func quotaOf(dec decider) *quotaServer {
	if f, ok := dec.(*fleet); ok && len(f.stores) > 0 {
		if n, ok := f.stores[0].(*quotaNode); ok {
			return n.srv
		}
	}
	return nil
}

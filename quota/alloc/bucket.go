package alloc

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
)

// Defaults of Settings' zero values.
const (
	DefaultHistory = 2 // a demand change is known in full after two reports
	// MaxHeld bounds the assignments a client record may carry in the shared encoding
	// (older versions wrote several; only the last one counts).
	MaxHeld = 8
)

// Settings describe one bucket's limit and how it is shared. The zero value of every field
// but Limit and Period is a documented default.
type Settings struct {
	// Limit is the number of requests per Period the whole fleet may make.
	Limit int64
	// Period is the limit's period.
	Period time.Duration
	// Fairness splits the limit (default MaxMin).
	Fairness Fairness
	// StaticShare is every client's share under Static, in requests per Period.
	StaticShare int64
	// TTL is how long an assignment lasts unless renewed; default 2 × Period capped to one
	// minute, at least one second, rounded up to whole seconds.
	TTL time.Duration
	// History is how many reports a client's demand is averaged over (default
	// DefaultHistory): the sum of their counts over the sum of their elapsed times.
	History int
	// DefaultDemand is the demand, in requests per Period, of a client that has not yet
	// reported a usage over a positive elapsed time; 0 means Limit (a newcomer asks for the
	// whole limit, so under MaxMin it gets an equal share at most).
	DefaultDemand float64
	// IdleAfter drops the demand of a client that has not reported for that long (default
	// the TTL, or 1.5 × the client's reporting interval when that is longer, at most 3 ×
	// TTL); what it holds still counts until it expires. With the default a silent client's
	// share is free one TTL after its last report (when TTL ≥ interval / 2).
	IdleAfter time.Duration
	// ReleaseOnLeave frees a client's share as soon as it leaves (Bucket.Release) instead of
	// when its last assignment expires (Bucket.Leave, the default). It trades exactness for
	// capacity: a client whose stream broke while it lives on may spend its last share until
	// it expires while the others already have it, so the fleet may hold up to the limit
	// plus the leaver's share for one TTL.
	ReleaseOnLeave bool
	// Grace is how long past its TTL an assignment still counts (default DefaultGrace): a
	// client counts the TTL from when it receives the assignment, after the network's
	// delivery delay, and its clock may run behind, so the share it frees is handed out
	// that much later.
	Grace time.Duration
}

// DefaultGrace is Settings.Grace's default: above a delivery delay and a clock skew
// between hosts that keep time (NTP).
const DefaultGrace = 100 * time.Millisecond

// lasts is how long an assignment counts: the TTL and the grace.
func (s *Settings) lasts() time.Duration {
	if s.Grace > 0 {
		return s.ttl() + s.Grace
	}
	return s.ttl() + DefaultGrace
}

// ttl returns TTL or its default.
func (s *Settings) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	ttl := min(max(2*s.Period, time.Second), time.Minute)
	return (ttl + time.Second - 1).Truncate(time.Second) // whole seconds: older Envoys read only those
}

// EffectiveTTL returns the assignment time to live in force (TTL or its default).
func (s *Settings) EffectiveTTL() time.Duration { return s.ttl() }

// Retention is how long a client's state matters after its last report: the longest
// IdleAfter, then one TTL for what it holds. A shared store keeps a bucket that long after
// its last write.
func (s *Settings) Retention() time.Duration {
	idle := 3 * s.ttl()
	if s.IdleAfter > 0 {
		idle = s.IdleAfter
	}
	return idle + s.lasts()
}

// idleAfter is how long client c may stay silent before its demand stops counting.
func (s *Settings) idleAfter(c *Client) int64 {
	if s.IdleAfter > 0 {
		return int64(s.IdleAfter)
	}
	ttl := int64(s.ttl())
	var interval int64
	if n := len(c.History); n > 0 {
		interval = c.History[n-1].Elapsed
	}
	return min(max(ttl, interval+interval/2), 3*ttl)
}

func (s *Settings) history() int {
	if s.History > 0 {
		return s.History
	}
	return DefaultHistory
}

// Sample is one usage report: requests counted (allowed + denied) over an elapsed time.
type Sample struct {
	Count   float64
	Elapsed int64 // nanoseconds
}

// Assignment is a share handed to a client, in requests per Period, counted until Expires
// (Unix nanoseconds): the TTL the client is sent, and the grace (Settings.Grace).
type Assignment struct {
	Share   int64
	Expires int64
}

// Client is what a bucket knows of one client. Its fields are exported so a shared store
// can persist it (see Encode); treat them as read-only.
type Client struct {
	// History holds the last reports, oldest first.
	History []Sample
	// Seen is when the client last reported (Unix ns); Left says its stream has closed.
	Seen int64
	Left bool
	// Held are the assignments that may still be in force, oldest first, shares decreasing.
	Held []Assignment
	// Class is the criticality of the client's demand (the zero value, Critical, without
	// classes): when the bucket's demand exceeds its limit, the classes are served in
	// sluice.Criticalities() order (see Targets).
	Class sluice.Criticality

	lacks int64 // how far below its target the last recomputation left it (not encoded)
}

// demand returns the client's smoothed demand in requests per period, or def without history.
func (c *Client) demand(period time.Duration, def float64) float64 {
	var count float64
	var elapsed int64
	for _, s := range c.History {
		count += s.Count
		elapsed += s.Elapsed
	}
	if elapsed <= 0 {
		return def
	}
	return count * float64(period) / float64(elapsed)
}

// holds returns the share the client may be spending at now: the largest of its unexpired
// assignments. A client applies an assignment when it receives it, so until the newest one
// is known to be delivered (see Bucket.Delivered) it may still be spending an older, larger
// one: a shrunk share frees the difference only once delivered (or when the older
// assignment expires).
func (c *Client) holds(now int64) int64 {
	var most int64
	for _, a := range c.Held {
		if a.Expires > now {
			most = max(most, a.Share)
		}
	}
	return most
}

// latest returns the share of the client's newest assignment, 0 when it has expired: what
// the client spends once everything handed to it has been delivered.
func (c *Client) latest(now int64) int64 {
	if n := len(c.Held); n > 0 && c.Held[n-1].Expires > now {
		return c.Held[n-1].Share
	}
	return 0
}

// prune drops the expired assignments.
func (c *Client) prune(now int64) {
	kept := c.Held[:0]
	for _, a := range c.Held {
		if a.Expires > now {
			kept = append(kept, a)
		}
	}
	c.Held = kept
}

// hold records a new assignment and returns it as recorded: its Expires is moved past the
// previous assignment's, so that Expires orders a client's assignments (a stream drops one
// older than what it last sent, and Delivered names one by it). The older assignments it
// covers (no larger, expiring no later) are dropped; larger ones stay counted until a newer
// one is delivered. At most MaxHeld are kept: the two oldest merge into one as large and as
// long, which never counts less.
func (c *Client) hold(a Assignment) Assignment {
	if n := len(c.Held); n > 0 {
		a.Expires = max(a.Expires, c.Held[n-1].Expires+1)
	}
	kept := c.Held[:0]
	for _, o := range c.Held {
		if o.Share > a.Share || o.Expires > a.Expires {
			kept = append(kept, o)
		}
	}
	c.Held = append(kept, a)
	for len(c.Held) > MaxHeld {
		c.Held[1] = Assignment{Share: max(c.Held[0].Share, c.Held[1].Share), Expires: max(c.Held[0].Expires, c.Held[1].Expires)}
		c.Held = append(c.Held[:0], c.Held[1:]...)
	}
	return a
}

// pending reports whether the client may still be spending more than its newest
// assignment: one handed to it earlier is larger and not yet superseded by a delivery.
func (c *Client) pending(now int64) bool { return c.holds(now) > c.latest(now) }

// Bucket is the allocation state of one bucket: its clients by id. The zero value is an
// empty bucket. It is not safe for concurrent use.
type Bucket struct {
	Clients map[string]*Client
}

// Report records client id's usage (count requests over elapsed) at now and returns the
// assignment it gets: its target share under the Fairness, less what the others' shares
// leave short (see ReportPush; Report pushes nothing). The assignment lasts until now + TTL. A
// report with elapsed <= 0 subscribes the client without a demand sample. The client's
// demand is of class Critical; see ReportClass.
func (b *Bucket) Report(s *Settings, id string, now int64, count float64, elapsed time.Duration) Assignment {
	return b.ReportClass(s, id, sluice.Critical, now, count, elapsed)
}

// ReportClass is Report for a client whose demand is of criticality class (one client id
// has one class: a caller reporting several classes of one bucket gives each its own id).
// It pushes nothing: the other clients are counted at their new targets but not told (see
// ReportPush).
func (b *Bucket) ReportClass(s *Settings, id string, class sluice.Criticality, now int64, count float64, elapsed time.Duration) Assignment {
	a, _ := b.ReportPush(s, id, class, now, count, elapsed, nil, nil)
	return a
}

// Leave marks client id as gone (its stream closed): its demand no longer counts, and what
// it holds counts until it expires, since a client whose stream broke while it lives on
// keeps spending its last share until then. The share returns to the pool at the first
// recomputation after that (see Rebalance). Release frees it at once instead.
func (b *Bucket) Leave(id string) {
	if c := b.Clients[id]; c != nil {
		c.Left = true
	}
}

// Release is Leave, and frees what client id holds at once: for a client known to have
// stopped spending (Settings.ReleaseOnLeave says the bucket assumes it). A client that
// lives on may spend its last share until it expires: the overcommit is that share for at
// most one TTL.
func (b *Bucket) Release(id string) {
	if c := b.Clients[id]; c != nil {
		c.Left, c.Held = true, c.Held[:0]
	}
}

// Expire drops expired assignments, and the clients that hold nothing and are gone or idle.
func (b *Bucket) Expire(s *Settings, now int64) {
	for id, c := range b.Clients {
		c.prune(now)
		if len(c.Held) == 0 && (c.Left || now-c.Seen >= s.idleAfter(c)) {
			delete(b.Clients, id)
		}
	}
}

// Active reports whether client id takes part in the split at now: it has reported within
// IdleAfter and its stream has not closed.
func (b *Bucket) active(s *Settings, c *Client, now int64) bool {
	return !c.Left && now-c.Seen < s.idleAfter(c)
}

// Targets returns the share each active client should get under the Fairness at now, by
// client id; the limit is split over the active clients in the order of their ids, so
// replicas computing over the same state agree. When the clients are of more than one
// criticality class and their demands exceed the limit, the classes are served in
// sluice.Criticalities() order instead (see splitByClass).
func (b *Bucket) Targets(s *Settings, now int64) map[string]int64 {
	ids := make([]string, 0, len(b.Clients))
	for id, c := range b.Clients {
		if b.active(s, c, now) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	def := s.defaultDemand()
	demands := make([]float64, len(ids))
	classes := 0 // a bit per class present
	for i, id := range ids {
		c := b.Clients[id]
		demands[i] = c.demand(s.Period, def)
		classes |= 1 << c.Class
	}
	shares := make([]int64, len(ids))
	if classes&(classes-1) != 0 && overLimit(s, demands) {
		b.splitByClass(s, ids, demands, shares)
	} else {
		split(s, s.Limit, demands, shares)
	}
	out := make(map[string]int64, len(ids))
	for i, id := range ids {
		out[id] = shares[i]
	}
	return out
}

// overLimit reports whether the demands exceed what the Fairness can give: the limit, or
// under Static the clients' static shares.
func overLimit(s *Settings, demands []float64) bool {
	if s.Fairness == Static {
		return int64(len(demands))*s.StaticShare > s.Limit
	}
	var total float64
	for _, d := range demands {
		total += clean(d)
	}
	return total > float64(s.Limit)
}

// splitByClass serves the classes most important first, when their demands exceed the
// limit: each class gets its whole demand (rounded up) while the limit lasts, split among
// its clients by the Fairness; the first class that does not fit shares what is left, and
// the classes after it get nothing. Under Static a class's demand is its clients' static
// shares. ids are sorted, so the split is the same on every replica.
func (b *Bucket) splitByClass(s *Settings, ids []string, demands []float64, shares []int64) {
	left := max(s.Limit, 0)
	var idx []int
	var d []float64
	for _, class := range sluice.Criticalities() {
		idx, d = idx[:0], d[:0]
		var want float64
		for i, id := range ids {
			if b.Clients[id].Class == class {
				idx = append(idx, i)
				d = append(d, demands[i])
				want += clean(demands[i])
			}
		}
		if len(idx) == 0 {
			continue
		}
		if s.Fairness == Static {
			want = float64(int64(len(idx)) * s.StaticShare)
		}
		budget := left
		if want < float64(left) {
			budget = int64(math.Ceil(want))
		}
		out := make([]int64, len(idx))
		split(s, budget, d, out)
		for j, i := range idx {
			shares[i] = min(out[j], budget)
		}
		left -= budget
	}
}

// split writes into shares the Fairness split of limit over demands.
func split(s *Settings, limit int64, demands []float64, shares []int64) {
	switch s.Fairness {
	case Proportional:
		ProportionalSplit(limit, demands, shares)
	case Static:
		for i := range shares {
			shares[i] = min(s.StaticShare, max(limit, 0))
		}
	default:
		MaxMinFair(limit, demands, shares)
	}
}

// knownClass reports whether c is one of sluice.Criticalities().
func knownClass(c sluice.Criticality) bool { return slices.Contains(sluice.Criticalities(), c) }

// defaultDemand is the demand of a client without history: DefaultDemand, or Limit.
func (s *Settings) defaultDemand() float64 {
	if s.DefaultDemand > 0 {
		return s.DefaultDemand
	}
	return float64(s.Limit)
}

// Demand returns client id's smoothed demand in requests per Period (DefaultDemand, or
// Limit, before its first sample), and false for an unknown client.
func (b *Bucket) Demand(s *Settings, id string) (float64, bool) {
	c := b.Clients[id]
	if c == nil {
		return 0, false
	}
	return c.demand(s.Period, s.defaultDemand()), true
}

// Committed returns the sum, over clients, of the share each may be spending at now: its
// largest unexpired assignment not superseded by a delivered one. ReportPush, Delivered and
// Rebalance keep it at most Limit.
func (b *Bucket) Committed(now int64) int64 {
	var sum int64
	for _, c := range b.Clients {
		sum += c.holds(now)
	}
	return sum
}

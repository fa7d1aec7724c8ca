package alloc

import (
	"sort"
	"time"

	"github.com/sluicehq/sluice"
)

// Push is an assignment handed at a recomputation to a client other than the reporter, for
// the caller to send it on that client's stream at once.
type Push struct {
	Client string
	Assignment
	// Pending says the client was handed a larger share before, still counted: once this
	// assignment is delivered, call Bucket.Delivered so the difference is freed.
	Pending bool
}

// deadband is how far a client's share may be from its target before a recomputation
// pushes it a new one: 1/32 of the share, at least one request. Smaller moves wait for the
// client's own next report, so a fleet whose demands wobble is not sent a message per
// client at every report.
func deadband(share int64) int64 { return max(1, share/32) }

// ReportPush records client id's usage (count requests over elapsed, demand of class) at
// now, recomputes every client's target under the Fairness, and hands out the new shares
// (see Rebalance): the reporter gets its target when that is no more than it holds, else
// what it holds plus its part of what is free; the other clients local accepts are pushed
// theirs (appended to pushes). local nil accepts no client.
//
// A share is never handed out before it is free: a client that shrinks is counted at what
// it held until its new assignment is delivered (Delivered), so a newcomer whose fair share
// is still held by others gets what is free now, and the rest at the recomputation that
// follows the delivery of their shrinks. The shares the clients may be spending therefore
// sum to at most Limit at every instant (Committed), whatever the order of delivery.
func (b *Bucket) ReportPush(s *Settings, id string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, local func(string) bool, pushes []Push) (Assignment, []Push) {
	if b.Clients == nil {
		b.Clients = make(map[string]*Client)
	}
	b.Expire(s, now)
	c := b.Clients[id]
	if c == nil {
		c = &Client{}
		b.Clients[id] = c
	}
	if !knownClass(class) {
		class = sluice.Critical // the default class, as sluice.ParseCriticality reads an unknown one
	}
	c.Seen, c.Left, c.Class = now, false, class
	if elapsed > 0 && count >= 0 {
		c.History = append(c.History, Sample{Count: count, Elapsed: int64(elapsed)})
		if h := s.history(); len(c.History) > h {
			c.History = append(c.History[:0], c.History[len(c.History)-h:]...)
		}
	}
	return b.rebalance(s, id, now, local, pushes)
}

// Pending reports whether client id may still be spending more than its newest assignment
// (an older, larger one is counted until a newer one is delivered): the caller confirms the
// delivery of the newest with Delivered.
func (b *Bucket) Pending(id string, now int64) bool {
	c := b.Clients[id]
	return c != nil && c.pending(now)
}

// Lacks returns how far below its target the last recomputation left client id's share,
// because the rest was still held by others (their shrinks in flight, or a leaver's share
// not expired): 0 when it got its target, or for an unknown client. It is not part of the
// encoding: read it after the ReportPush, Delivered or Rebalance that set it.
func (b *Bucket) Lacks(id string) int64 {
	if c := b.Clients[id]; c != nil {
		return c.lacks
	}
	return 0
}

// Delivered records that client id has received assignment a (as returned by ReportPush
// or in a Push): the larger ones handed to it before no longer count. When that frees
// capacity, the shares are recomputed and the clients waiting for it (local accepts them)
// are pushed theirs, appended to pushes. An unknown client or assignment changes nothing.
func (b *Bucket) Delivered(s *Settings, id string, a Assignment, now int64, local func(string) bool, pushes []Push) []Push {
	c := b.Clients[id]
	if c == nil {
		return pushes
	}
	for i, h := range c.Held {
		if h.Expires != a.Expires || h.Share != a.Share {
			continue
		}
		if i == 0 {
			return pushes
		}
		before := c.holds(now)
		c.Held = append(c.Held[:0], c.Held[i:]...)
		if c.holds(now) == before {
			return pushes
		}
		_, pushes = b.rebalance(s, "", now, local, pushes)
		return pushes
	}
	return pushes
}

// DeliverNow delivers, at now, the reporter's assignment a (id; "" for none) and the pushes,
// and those their deliveries make in turn, as a server in the same process as its clients
// does (a simulation): it returns every assignment made, the reporter's first, in the order
// made, so that each client's last one is what it holds.
func (b *Bucket) DeliverNow(s *Settings, now int64, id string, a Assignment, pushes []Push, local func(string) bool) []Push {
	var out []Push
	if id != "" {
		out = append(out, Push{Client: id, Assignment: a, Pending: b.Pending(id, now)})
	}
	out = append(out, pushes...)
	for i := 0; i < len(out); i++ {
		if p := out[i]; p.Pending {
			out = b.Delivered(s, p.Client, p.Assignment, now, local, out)
		}
	}
	return out
}

// Rebalance recomputes the shares at now without a report, e.g. when a share held by a
// client that left has expired, and pushes the clients local accepts theirs (appended to
// pushes).
func (b *Bucket) Rebalance(s *Settings, now int64, local func(string) bool, pushes []Push) []Push {
	if len(b.Clients) == 0 {
		return pushes
	}
	b.Expire(s, now)
	_, pushes = b.rebalance(s, "", now, local, pushes)
	return pushes
}

// NextRelease returns the earliest instant after now at which a share that is counted but
// not spent by an active client's newest assignment expires (a leaver's, an idle client's,
// or one superseded by an assignment not yet known to be delivered), or 0 when there is
// none: Rebalance then hands it out.
func (b *Bucket) NextRelease(s *Settings, now int64) int64 {
	var next int64
	for _, c := range b.Clients {
		active := b.active(s, c, now)
		for i, a := range c.Held {
			if a.Expires <= now || (active && i == len(c.Held)-1) {
				continue
			}
			if next == 0 || a.Expires < next {
				next = a.Expires
			}
		}
	}
	return next
}

// rebalance recomputes every client's target under the Fairness and hands out the new
// shares; id is the reporter ("" for none):
//
//   - every active local client whose newest share is more than a deadband (1/32) above its
//     target is pushed its target, and counted at what it held until that is delivered;
//   - the reporter gets its target when that is no more than it holds, and every active
//     local client whose target is above what it holds shares what the limit leaves free:
//     each its target when it fits, or what it holds plus a part of the free capacity in
//     proportion to what it lacks; one other than the reporter is pushed its new share when
//     that is its target or more than a deadband above what it holds;
//   - every other client, and one gone or idle, counts at what it holds until that expires.
func (b *Bucket) rebalance(s *Settings, id string, now int64, local func(string) bool, pushes []Push) (Assignment, []Push) {
	targets := b.Targets(s, now)
	first := len(pushes)
	expires := now + int64(s.lasts())
	type grower struct {
		id          string
		held, wants int64
	}
	var growers []grower
	var fixed, wanted int64 // the shares counted as held; what the growers lack
	mine := Assignment{Expires: expires}
	ids := make([]string, 0, len(b.Clients))
	for cid := range b.Clients {
		ids = append(ids, cid)
	}
	sort.Strings(ids) // pushes in a stable order
	for _, cid := range ids {
		o := b.Clients[cid]
		o.lacks = 0
		held := o.holds(now)
		if !b.active(s, o, now) {
			fixed += held
			continue
		}
		target := targets[cid]
		isLocal := cid == id || (local != nil && local(cid))
		switch latest := o.latest(now); {
		case cid == id && target <= held:
			mine.Share = target
			fixed += held
		case isLocal && latest-target > deadband(latest):
			fixed += held
			pushes = append(pushes, Push{Client: cid, Assignment: Assignment{Share: target, Expires: expires}})
		case target > held && isLocal:
			growers = append(growers, grower{cid, held, target - held})
			wanted += target - held
		default:
			fixed += held
		}
	}
	free := s.Limit - fixed
	for _, g := range growers {
		free -= g.held
	}
	for _, g := range growers {
		share := g.held + g.wants
		if wanted > free {
			share = g.held + max(free, 0)*g.wants/wanted
		}
		if g.id == id && free < 0 { // over the limit already (a reload, another replica's late write)
			share = max(g.held+free, 0)
		}
		b.Clients[g.id].lacks = g.held + g.wants - share
		if g.id == id {
			mine.Share = share
			continue
		}
		if share-g.held >= deadband(g.held+g.wants) || share == g.held+g.wants {
			pushes = append(pushes, Push{Client: g.id, Assignment: Assignment{Share: share, Expires: expires}})
		}
	}
	if c := b.Clients[id]; c != nil {
		mine = c.hold(mine)
	}
	for i := first; i < len(pushes); i++ {
		p := &pushes[i]
		if o := b.Clients[p.Client]; o != nil {
			p.Assignment = o.hold(p.Assignment)
			p.Pending = o.pending(now)
		}
	}
	return mine, pushes
}

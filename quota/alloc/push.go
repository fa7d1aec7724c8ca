package alloc

import (
	"sort"
	"time"

	"github.com/sluicehq/sluice"
)

// Push is an assignment handed at a report to a client other than the reporter, for the
// caller to send it on that client's stream at once.
type Push struct {
	Client string
	Assignment
}

// deadband is how far a client's share may be from its target before a recomputation
// pushes it a new one: 1/32 of the share, at least one request. Smaller moves wait for the
// client's own next report, so a fleet whose demands wobble is not sent a message per
// client at every report.
func deadband(share int64) int64 { return max(1, share/32) }

// ReportPush records client id's usage (count requests over elapsed, demand of class) at
// now, recomputes every client's target under the Fairness, and hands out the new shares:
//
//   - every active client whose share is more than a deadband (1/32) above its target is
//     counted at its target; when local accepts it, it is pushed the target at once
//     (appended to pushes), otherwise it learns it at its own next report;
//   - the reporter gets its target when that is no more than it holds, and every active
//     local client whose share is more than a deadband below its target (the reporter
//     always) shares what the limit leaves free: each its target when it fits, or its share
//     plus a part of the free capacity in proportion to what it lacks;
//   - a client gone or idle counts at what it holds until that expires.
//
// So a newcomer gets its fair share at its first report, whatever the others held, and
// every waiting client gets its share at the first recomputation after capacity frees up.
// When every client is local and every push is delivered, the shares the clients hold sum
// to at most Limit (Committed); until a push reaches its client, the client may spend its
// previous, larger share: the overcommit is at most the shares handed to newcomers and
// growers meanwhile (the pushes' shrinkage), for as long as delivery takes (a client that
// is not local: until its next report). local nil accepts no client.
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
	targets := b.Targets(s, now)
	first := len(pushes)
	expires := now + int64(s.ttl())
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
		held := o.holds(now)
		if !b.active(s, o, now) {
			fixed += held
			continue
		}
		target := targets[cid]
		isLocal := cid == id || (local != nil && local(cid))
		switch {
		case cid == id && held >= target:
			mine.Share = target
			fixed += target
		case held-target > deadband(held):
			fixed += target
			if isLocal {
				pushes = append(pushes, Push{Client: cid, Assignment: Assignment{Share: target, Expires: expires}})
			}
		case cid == id || (isLocal && target-held > deadband(target)):
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
		if g.id == id {
			if free < 0 { // over the limit already (a reload, another replica's late write)
				share = max(g.held+free, 0)
			}
			mine.Share = share
			continue
		}
		if share-g.held >= deadband(g.held+g.wants) || share == g.held+g.wants {
			pushes = append(pushes, Push{Client: g.id, Assignment: Assignment{Share: share, Expires: expires}})
		}
	}
	c.hold(mine)
	for _, p := range pushes[first:] {
		if o := b.Clients[p.Client]; o != nil {
			o.hold(p.Assignment)
		}
	}
	return mine, pushes
}

package rlqs

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota/alloc"
)

// holder names a client record of the allocation state: the bucket's state key and the
// client id.
type holder struct{ key, client string }

// register makes sb the holder of its client record, for pushes.
func (s *Service) register(sb *sub) {
	s.regMu.Lock()
	s.holders[holder{sb.stateKey, sb.client}] = sb
	s.regMu.Unlock()
}

// unregister forgets sb as a holder.
func (s *Service) unregister(sb *sub) {
	s.regMu.Lock()
	if h := (holder{sb.stateKey, sb.client}); s.holders[h] == sb {
		delete(s.holders, h)
	}
	s.regMu.Unlock()
}

func (s *Service) holderOf(key, client string) *sub {
	s.regMu.RLock()
	defer s.regMu.RUnlock()
	return s.holders[holder{key, client}]
}

// notify returns what a Ledger tells of the assignments of bucket key: the clients with a
// stream on this replica are local, and each assignment made to one (the reporter's, and
// those pushed to the others) is recorded on its stream, which sends the pushed ones at once.
func (s *Service) notify(key string) Notify {
	return Notify{
		Local: func(client string) bool { return s.holderOf(key, client) != nil },
		Assigned: func(h Handed) {
			if sb := s.holderOf(key, h.Client); sb != nil {
				sb.st.pushed(sb, h)
			}
		},
	}
}

// confirm tells the ledger that sb's client was sent assignment a of rule, which
// supersedes a larger share: the difference is free, and handed to the clients waiting for
// it.
func (s *Service) confirm(sb *sub, rule *config.QuotaRule, a alloc.Assignment) {
	ctx := context.Background()
	if err := s.ledger.Delivered(ctx, sb.stateKey, &rule.Share, sb.client, a, s.clock.Now().UnixNano(), s.notify(sb.stateKey)); err != nil {
		s.stateError(ctx, err)
	}
}

// rebalanceAt recomputes bucket key's shares under rule at the instant at (Unix ns: when a
// share counted but not spent expires, a leaver's say), so the clients waiting for it get it
// then rather than at the next report; each bucket has at most one timer, at the earliest
// such instant, and the recomputation names the next. The timers stop when the service
// drains.
func (s *Service) rebalanceAt(key string, rule *config.QuotaRule, at int64) {
	if at <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	if t := s.timers[key]; t != nil {
		if t.at <= at {
			return
		}
		t.Stop()
	}
	t := &rebalanceTimer{at: at}
	d := time.Duration(at-s.clock.Now().UnixNano()) + time.Millisecond
	t.Timer = time.AfterFunc(max(d, 0), func() {
		s.mu.Lock()
		live := s.timers[key] == t
		if live {
			delete(s.timers, key)
		}
		s.mu.Unlock()
		if !live {
			return
		}
		ctx := context.Background()
		next, err := s.ledger.Rebalance(ctx, key, &rule.Share, s.clock.Now().UnixNano(), s.notify(key))
		if err != nil {
			s.stateError(ctx, err)
			return
		}
		s.rebalanceAt(key, rule, next)
	})
	s.timers[key] = t
}

// rebalanceTimer is a bucket's pending recomputation.
type rebalanceTimer struct {
	*time.Timer
	at int64
}

// deliverRemote delivers an assignment another replica made to a client of this one.
func (s *Service) deliverRemote(key string, h Handed) {
	if sb := s.holderOf(key, h.Client); sb != nil {
		sb.st.pushed(sb, h)
	}
}

// replicaOf returns the replica id a client id starts with (see Service.prefix and
// StreamRateLimitQuotas), or "" for an id of another form.
func replicaOf(client string) string {
	const n = 2 * replicaIDBytes
	if len(client) <= n || client[n] != '-' {
		return ""
	}
	return client[:n]
}

// DefaultMaxStreamsPerClient and DefaultStreamIdleTimeout are Config's defaults.
const (
	DefaultMaxStreamsPerClient = 100
	DefaultStreamIdleTimeout   = 2 * time.Minute
)

// PeerAddress is a Config.ClientKey: the IP address of the stream's peer (its port left
// out, so a client's connections count together), each address its own client. The
// default, PeerIdentity, groups an IPv6 host's addresses and prefers a client certificate.
func PeerAddress(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

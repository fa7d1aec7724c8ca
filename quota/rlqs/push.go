package rlqs

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/peer"

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

// notify returns what a Ledger tells of the assignments of a report of bucket key: the
// clients with a stream on this replica are local, and each assignment made (the
// reporter's, and those pushed to the others) is recorded on its stream, which sends the
// pushed ones at once.
func (s *Service) notify(key string) Notify {
	return Notify{
		Local: func(client string) bool { return s.holderOf(key, client) != nil },
		Assigned: func(client string, a alloc.Assignment) {
			if sb := s.holderOf(key, client); sb != nil {
				sb.st.pushed(sb, a)
			}
		},
	}
}

// DefaultMaxStreamsPerClient and DefaultStreamIdleTimeout are Config's defaults.
const (
	DefaultMaxStreamsPerClient = 100
	DefaultStreamIdleTimeout   = 2 * time.Minute
)

// PeerAddress is the default Config.ClientKey: the IP address of the stream's peer (its
// port left out, so a client's connections count together).
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

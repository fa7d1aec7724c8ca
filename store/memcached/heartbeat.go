package memcached

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
)

var _ sluice.Heartbeater = (*Store)(nil)

// Heartbeat implements sluice.Heartbeater (the fallback decorator's count of live instances):
// one item per group, "<prefix>instances:<group>|h" (hashed like any key), holding each
// instance's expiry on the client clock, updated by the same gets/cas loop as the CAS
// algorithms: expired instances are dropped, this one marked live for ttl. The item expires
// with its newest heartbeat.
func (s *Store) Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (int, error) {
	switch {
	case instance == "":
		return 0, fmt.Errorf("%w: instance: empty", sluice.ErrInvalidKey)
	case ttl <= 0:
		return 0, fmt.Errorf("%w: ttl: must be positive, got %v", sluice.ErrInvalidRule, ttl)
	case s.closed.Load():
		return 0, fmt.Errorf("memcached: heartbeat: %w", sluice.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return 0, unavailable(err)
	}
	name := "instances:" + group
	key := s.cfg.prefix + body(s.cfg.prefix, name) + "|h"
	var live int
	err := s.casLoop(name, func() (err error) {
		live, err = s.beat(key, instance, s.clock.Now().UnixNano(), int64(ttl))
		return err
	})
	if err != nil {
		return 0, err
	}
	return live, nil
}

// beat is one gets/cas attempt of Heartbeat.
func (s *Store) beat(key, instance string, now, ttl int64) (int, error) {
	it, err := s.client.Get(key)
	var old []byte
	switch {
	case err == nil:
		old = it.Value
	case errors.Is(err, memcache.ErrCacheMiss):
		it = nil
	default:
		return 0, unavailable(err)
	}
	var out []byte
	live := 1
	newest := now + ttl
	for b := old; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			break // not ours: start afresh
		}
		id := string(b[k : k+int(n)])
		b = b[k+int(n):]
		exp, k := binary.Varint(b)
		if k <= 0 {
			break
		}
		b = b[k:]
		if id == instance || exp <= now {
			continue
		}
		out = appendBeat(out, id, exp)
		live++
		newest = max(newest, exp)
	}
	out = appendBeat(out, instance, now+ttl)
	if err := s.write(it, key, out, s.expiration(newest-now)); err != nil {
		return 0, err
	}
	return live, nil
}

func appendBeat(b []byte, id string, exp int64) []byte {
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(b, id...)
	return binary.AppendVarint(b, exp)
}

package rlqs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
	"github.com/sluicehq/sluice/quota/alloc"
)

// DefaultRedisPrefix prefixes the keys of NewRedisLedger.
const DefaultRedisPrefix = "sluice:rlqs:"

// maxTxRetries bounds the optimistic retries of one report when replicas race on a bucket.
const maxTxRetries = 16

// redisLedger is a Ledger shared by several replicas through Redis: one hash per bucket,
// one field per client (alloc.AppendClient), updated under WATCH so that two replicas never
// hand out the same free share. An assignment made to a client another replica serves is
// published on that replica's channel, which delivers it to the client's stream.
type redisLedger struct {
	c      goredis.UniversalClient
	prefix string
	obs    Observer // set by New before any call; counts the retries
	// locks serialize this replica's calls on one bucket (by a hash of its key), so that
	// the assignments of two reports reach their streams in the order Redis saw them.
	locks [64]sync.Mutex

	deliver func(key string, h Handed) // set by New (attach) before any call
	sub     *goredis.PubSub
	done    chan struct{}
	close   sync.Once
}

// NewRedisLedger returns a Ledger kept in Redis, so that every replica using the same Redis
// and prefix (default DefaultRedisPrefix) splits one budget per bucket: each report reads
// the bucket's clients (demands and held assignments, whichever replica serves them),
// computes the same split, and writes the clients it changed back in a transaction that
// retries when another replica wrote the bucket meanwhile. Each bucket's hash expires one
// alloc.Settings.Retention after its last write. A new assignment for a client of another
// replica reaches it through Redis pub/sub (the channel prefix + "push:" + the replica's
// id), so a recomputation on one replica reaches every replica's streams at once, and the
// share a shrinking client frees is handed out once its replica has sent it the shrink.
// Replicas' clocks should agree (NTP): assignments expire by the clock of the replica that
// handed them out.
//
// The Ledger is an io.Closer: Close ends its subscription (close it after the Service has
// stopped, before the client). Give each Service its own.
func NewRedisLedger(c goredis.UniversalClient, prefix string) Ledger {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &redisLedger{c: c, prefix: prefix, obs: nopObserver{}, deliver: func(string, Handed) {}}
}

func (r *redisLedger) observe(o Observer) { r.obs = o }

// channel is the pub/sub channel of a replica's pushes.
func (r *redisLedger) channel(replica string) string { return r.prefix + "push:" + replica }

// attach subscribes to this replica's channel and delivers what arrives on it.
func (r *redisLedger) attach(replica string, deliver func(key string, h Handed)) {
	r.deliver = deliver
	r.sub = r.c.Subscribe(context.Background(), r.channel(replica))
	r.done = make(chan struct{})
	ch := r.sub.Channel(goredis.WithChannelSize(4096))
	go func() {
		defer close(r.done)
		for m := range ch {
			if key, h, ok := decodeHanded([]byte(m.Payload)); ok {
				r.deliver(key, h)
			}
		}
	}()
}

// Close ends the subscription.
func (r *redisLedger) Close() error {
	var err error
	r.close.Do(func() {
		if r.sub != nil {
			err = r.sub.Close()
			<-r.done
		}
	})
	return err
}

// hashKey names a bucket's hash: a digest of the bucket key, as its own hash tag.
func (r *redisLedger) hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return r.prefix + "{" + hex.EncodeToString(sum[:12]) + "}"
}

// everyone accepts every client: each replica's clients are pushed, through it.
func everyone(string) bool { return true }

func (r *redisLedger) Report(ctx context.Context, key string, s *alloc.Settings, client string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, n Notify) (alloc.Assignment, error) {
	var a alloc.Assignment
	err := r.change(ctx, key, s, n, func(b *alloc.Bucket) []Handed {
		var pushes []alloc.Push
		a, pushes = b.ReportPush(s, client, class, now, count, elapsed, everyone, nil)
		return handed(b, client, a, pushes, now)
	})
	return a, err
}

func (r *redisLedger) Delivered(ctx context.Context, key string, s *alloc.Settings, client string, a alloc.Assignment, now int64, n Notify) error {
	return r.change(ctx, key, s, n, func(b *alloc.Bucket) []Handed {
		out := handed(b, "", alloc.Assignment{}, b.Delivered(s, client, a, now, everyone, nil), now)
		return append(out, Handed{Client: client}) // written, not told
	})
}

func (r *redisLedger) Rebalance(ctx context.Context, key string, s *alloc.Settings, now int64, n Notify) (next int64, err error) {
	err = r.change(ctx, key, s, n, func(b *alloc.Bucket) []Handed {
		out := handed(b, "", alloc.Assignment{}, b.Rebalance(s, now, everyone, nil), now)
		next = b.NextRelease(s, now)
		return out
	})
	return next, err
}

func (r *redisLedger) Leave(ctx context.Context, key string, s *alloc.Settings, client string, now int64, n Notify) (next int64, err error) {
	err = r.change(ctx, key, s, n, func(b *alloc.Bucket) []Handed {
		out := handed(b, "", alloc.Assignment{}, leave(b, s, client, now, everyone), now)
		next = b.NextRelease(s, now)
		return append(out, Handed{Client: client}) // written, not told
	})
	return next, err
}

// change applies f to the bucket in one transaction (this replica's calls on the bucket
// taking turns), writes back the clients of the assignments f returns, and then hands each
// assignment to its client: through n for this replica's, published to its replica's
// channel for another's. An entry with the zero assignment is written and not told.
func (r *redisLedger) change(ctx context.Context, key string, s *alloc.Settings, n Notify, f func(*alloc.Bucket) []Handed) error {
	mu := r.lock(key)
	mu.Lock()
	defer mu.Unlock()
	var out []Handed
	err := r.update(ctx, key, s, func(b *alloc.Bucket) []string {
		out = f(b)
		written := make([]string, len(out))
		for i, h := range out {
			written[i] = h.Client
		}
		return written
	})
	if err != nil {
		return err
	}
	var remote []Handed
	for _, h := range out {
		switch {
		case h.Assignment == (alloc.Assignment{}):
		case n.Local == nil || n.Local(h.Client):
			n.tell(h)
		default:
			remote = append(remote, h)
		}
	}
	if len(remote) > 0 {
		// Best effort: a push lost here reaches its client at its next report, and the
		// share it frees stays counted until then (never over).
		_, _ = r.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, h := range remote {
				if replica := replicaOf(h.Client); replica != "" {
					p.Publish(ctx, r.channel(replica), appendHanded(nil, key, h))
				}
			}
			return nil
		})
	}
	return nil
}

// appendHanded encodes a push for another replica: the bucket key, the client, the
// assignment and whether it is pending.
func appendHanded(dst []byte, key string, h Handed) []byte {
	dst = append(dst, 1) // version
	dst = wire.AppendString(dst, key)
	dst = wire.AppendString(dst, h.Client)
	dst = binary.AppendVarint(dst, h.Share)
	dst = binary.AppendVarint(dst, h.Expires)
	pending := byte(0)
	if h.Pending {
		pending = 1
	}
	return append(dst, pending)
}

// decodeHanded decodes what appendHanded wrote.
func decodeHanded(b []byte) (key string, h Handed, ok bool) {
	d := wire.NewReader(b)
	if d.Byte() != 1 {
		return "", Handed{}, false
	}
	key = d.String(1 << 20)
	h.Client = d.String(1 << 10)
	h.Share, h.Expires = d.Varint(), d.Varint()
	h.Pending = d.Byte() == 1
	return key, h, !d.Failed() && d.Len() == 0
}

// lock returns the mutex of bucket key.
func (r *redisLedger) lock(key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &r.locks[h.Sum32()%uint32(len(r.locks))]
}

// update reads the bucket, applies change, and writes back the entries of the clients
// change returns and the removal of the clients it dropped, atomically; it retries when
// another writer intervened.
func (r *redisLedger) update(ctx context.Context, key string, s *alloc.Settings, change func(*alloc.Bucket) []string) error {
	hk := r.hashKey(key)
	txf := func(tx *goredis.Tx) error {
		fields, err := tx.HGetAll(ctx, hk).Result()
		if err != nil {
			return err
		}
		b := alloc.Bucket{Clients: make(map[string]*alloc.Client, len(fields))}
		for id, v := range fields {
			if c, err := alloc.DecodeClient([]byte(v)); err == nil {
				b.Clients[id] = c
			}
		}
		written := change(&b)
		_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
			var gone []string
			for id := range fields {
				if b.Clients[id] == nil {
					gone = append(gone, id)
				}
			}
			if len(gone) > 0 {
				p.HDel(ctx, hk, gone...)
			}
			for _, client := range written {
				if c := b.Clients[client]; c != nil {
					p.HSet(ctx, hk, client, alloc.AppendClient(nil, c))
					p.PExpire(ctx, hk, s.Retention())
				}
			}
			return nil
		})
		return err
	}
	for i := 0; i < maxTxRetries; i++ {
		err := r.c.Watch(ctx, txf, hk)
		if errors.Is(err, goredis.TxFailedErr) {
			r.obs.StateRetry()
			continue
		}
		if err != nil {
			return fmt.Errorf("rlqs: redis: %w: %w", sluice.ErrStoreUnavailable, err)
		}
		return nil
	}
	return fmt.Errorf("rlqs: redis: bucket contended by other replicas %d times in a row", maxTxRetries)
}

package rlqs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
)

// DefaultRedisPrefix prefixes the keys of NewRedisLedger.
const DefaultRedisPrefix = "sluice:rlqs:"

// maxTxRetries bounds the optimistic retries of one report when replicas race on a bucket.
const maxTxRetries = 16

// redisLedger is a Ledger shared by several replicas through Redis: one hash per bucket,
// one field per client (alloc.AppendClient), updated under WATCH so that two replicas never
// hand out the same free share.
type redisLedger struct {
	c      redis.UniversalClient
	prefix string
	obs    Observer // set by New before any call; counts the retries
	// locks serialize this replica's calls on one bucket (by a hash of its key), so that
	// the assignments of two reports reach their streams in the order Redis saw them.
	locks [64]sync.Mutex
}

// NewRedisLedger returns a Ledger kept in Redis, so that every replica using the same Redis
// and prefix (default DefaultRedisPrefix) splits one budget per bucket: each report reads
// the bucket's clients (demands and held assignments, whichever replica serves them),
// computes the same split, and writes its client back in a transaction that retries when
// another replica wrote the bucket meanwhile. Each bucket's hash expires one
// alloc.Settings.Retention after its last write. Replicas' clocks should agree (NTP):
// assignments expire by the clock of the replica that handed them out.
func NewRedisLedger(c redis.UniversalClient, prefix string) Ledger {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &redisLedger{c: c, prefix: prefix, obs: nopObserver{}}
}

func (r *redisLedger) observe(o Observer) { r.obs = o }

// hashKey names a bucket's hash: a digest of the bucket key, as its own hash tag.
func (r *redisLedger) hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return r.prefix + "{" + hex.EncodeToString(sum[:12]) + "}"
}

func (r *redisLedger) Report(ctx context.Context, key string, s *alloc.Settings, client string, class sluice.Criticality, now int64, count float64, elapsed time.Duration, n Notify) (alloc.Assignment, error) {
	var a alloc.Assignment
	var pushes []alloc.Push
	mu := r.lock(key)
	mu.Lock()
	defer mu.Unlock()
	err := r.update(ctx, key, s, func(b *alloc.Bucket) []string {
		a, pushes = b.ReportPush(s, client, class, now, count, elapsed, n.Local, nil)
		written := []string{client}
		for _, p := range pushes {
			written = append(written, p.Client)
		}
		return written
	})
	if err == nil {
		n.tell(client, a, pushes)
	}
	return a, err
}

func (r *redisLedger) Leave(ctx context.Context, key string, s *alloc.Settings, client string, now int64) error {
	mu := r.lock(key)
	mu.Lock()
	defer mu.Unlock()
	return r.update(ctx, key, s, func(b *alloc.Bucket) []string {
		b.Leave(client)
		b.Expire(s, now)
		return []string{client}
	})
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
	txf := func(tx *redis.Tx) error {
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
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
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
		if errors.Is(err, redis.TxFailedErr) {
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

package regions

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// DefaultRedisPrefix prefixes the keys of NewRedisCoordinator.
const DefaultRedisPrefix = "sluice:regions:"

//go:embed cas.lua
var casSource string

var casScript = goredis.NewScript(casSource)

// redisCoordinator is a Coordinator in one Redis (one region's, reached by all).
type redisCoordinator struct {
	c      goredis.UniversalClient
	prefix string
}

// NewRedisCoordinator returns a Coordinator kept in Redis under prefix (default
// DefaultRedisPrefix): per key, a hash of the instances' demands and the escrow state, both
// named by a digest of the key (never the key itself) in one hash tag, and a hash of the
// regions' heartbeats. Every region's instances must reach the same Redis: typically one
// region's, the others over the network; a region cut off from it keeps deciding on the
// epochs it already read, then on nothing (see the package doc).
func NewRedisCoordinator(c goredis.UniversalClient, prefix string) Coordinator {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &redisCoordinator{c: c, prefix: prefix}
}

// keyOf names key's Redis keys: its digest as the hash tag.
func (r *redisCoordinator) keyOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return r.prefix + "{" + hex.EncodeToString(sum[:12]) + "}"
}

func (r *redisCoordinator) Exchange(ctx context.Context, x *Exchange) error {
	hb := r.prefix + "heartbeats"
	p := r.c.Pipeline()
	p.HSet(ctx, hb, x.Region, x.At)
	p.PExpire(ctx, hb, max(x.Live*4, time.Minute))
	beats := p.HGetAll(ctx, hb)
	states := make([]*goredis.StringCmd, len(x.Keys))
	demands := make([]*goredis.MapStringStringCmd, len(x.Keys))
	for i, k := range x.Keys {
		base := r.keyOf(k.Key)
		p.HSet(ctx, base+":d", x.Instance, demandRecord{x.Region, k.Demand, x.At}.encode())
		p.PExpire(ctx, base+":d", k.TTL)
		demands[i] = p.HGetAll(ctx, base+":d")
		states[i] = p.Get(ctx, base+":s")
	}
	if _, err := p.Exec(ctx); err != nil && err != goredis.Nil {
		return fmt.Errorf("regions: coordinator: %w: %w", sluice.ErrStoreUnavailable, err)
	}
	x.Heartbeats = make(map[string]int64)
	for region, v := range beats.Val() {
		var at int64
		if _, err := fmt.Sscan(v, &at); err == nil {
			x.Heartbeats[region] = at
		}
	}
	stale := r.c.Pipeline()
	for i := range x.Keys {
		k := &x.Keys[i]
		k.State = nil
		if b, err := states[i].Bytes(); err == nil {
			k.State = b
		}
		var records [][]byte
		for id, v := range demands[i].Val() {
			if d, ok := decodeDemand([]byte(v)); !ok || x.At-d.at > int64(k.TTL) {
				stale.HDel(ctx, r.keyOf(k.Key)+":d", id) // a gone instance's record
				continue
			}
			records = append(records, []byte(v))
		}
		k.Demands = sumDemands(records, x.At, x.Live)
	}
	if stale.Len() > 0 {
		_, _ = stale.Exec(ctx) // best effort: the records expire with the hash anyway
	}
	return nil
}

func (r *redisCoordinator) Propose(ctx context.Context, ps []Proposal) error {
	p := r.c.Pipeline()
	cmds := make([]*goredis.Cmd, len(ps))
	for i, pr := range ps {
		cmds[i] = casScript.EvalSha(ctx, p, []string{r.keyOf(pr.Key) + ":s"}, pr.Old, pr.New, max(pr.TTL.Milliseconds(), 1))
	}
	if _, err := p.Exec(ctx); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		p = r.c.Pipeline()
		for i, pr := range ps {
			cmds[i] = casScript.Eval(ctx, p, []string{r.keyOf(pr.Key) + ":s"}, pr.Old, pr.New, max(pr.TTL.Milliseconds(), 1))
		}
		_, err = p.Exec(ctx)
		if err != nil {
			return fmt.Errorf("regions: coordinator: %w: %w", sluice.ErrStoreUnavailable, err)
		}
	} else if err != nil {
		return fmt.Errorf("regions: coordinator: %w: %w", sluice.ErrStoreUnavailable, err)
	}
	for i := range ps {
		n, err := cmds[i].Int()
		ps[i].Written = err == nil && n == 1
	}
	return nil
}

package redis

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// The lease scripts (sluice.Leaser), generated like the algorithms' from lua/lease_*.lua.
var (
	//go:embed lua/gen/lease_acquire.lua
	leaseAcquireLua string
	//go:embed lua/gen/lease_renew.lua
	leaseRenewLua string
	//go:embed lua/gen/lease_release.lua
	leaseReleaseLua string
	//go:embed lua/gen/lease_clear.lua
	leaseClearLua string

	leaseAcquireScript = &script{name: "lease_acquire", src: leaseAcquireLua, sha: sha1Hex(leaseAcquireLua)}
	leaseRenewScript   = &script{name: "lease_renew", src: leaseRenewLua, sha: sha1Hex(leaseRenewLua)}
	leaseReleaseScript = &script{name: "lease_release", src: leaseReleaseLua, sha: sha1Hex(leaseReleaseLua)}
	leaseClearScript   = &script{name: "lease_clear", src: leaseClearLua, sha: sha1Hex(leaseClearLua)}
)

var (
	_ sluice.Leaser       = (*Store)(nil)
	_ sluice.LeaseClearer = (*Store)(nil)
)

// LeaseKey returns the Redis key holding a user key's leases: a sorted set of lease ids scored
// by their expiry (ms), in the key's hash tag, so its slot is the key's.
func (s *Store) LeaseKey(userKey string) string { return s.Key(userKey) + ":leases" }

// leaseParams packs a lease script's ARGV[1]: the clock (as for the algorithms' scripts,
// lua/prelude.lua), then the script's parameters, then zeros.
func (s *Store) leaseParams(ps ...int64) []byte {
	p := s.clockParams()
	for _, x := range ps {
		p = p.add(x)
	}
	for len(p) < paramsLen {
		p = p.add(0)
	}
	return p
}

// leaseMillis returns a lease in whole ms, rounded up.
func leaseMillis(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// AcquireLease implements sluice.Leaser: one script call (lua/lease_acquire.lua), bounded by
// ctx and the store's timeout, on the server's clock unless WithClock. Like every script
// call it is not retried; an acquire whose reply was lost may hold a slot until its lease
// expires.
func (s *Store) AcquireLease(ctx context.Context, req sluice.LeaseRequest) (sluice.LeaseDecision, error) {
	if err := req.Validate(s.cfg.maxKeyLen); err != nil {
		return sluice.LeaseDecision{}, err
	}
	if s.closed.Load() {
		return sluice.LeaseDecision{}, fmt.Errorf("redis: acquire lease: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	p := s.leaseParams(req.InFlight.Limit, req.Holdback, leaseMillis(req.InFlight.LeaseTime()))
	vals, err := s.evalScript(ctx, leaseAcquireScript, s.LeaseKey(req.Key), p, req.ID[:]).Int64Slice()
	if err != nil {
		return sluice.LeaseDecision{}, unavailable(err)
	}
	if len(vals) != 4 {
		return sluice.LeaseDecision{}, fmt.Errorf("redis: acquire lease: %w: %d values in the reply, want 4", sluice.ErrStoreUnavailable, len(vals))
	}
	return sluice.LeaseDecision{Admitted: vals[0] == 1, Capacity: req.InFlight.Limit, InFlight: vals[1], Remaining: vals[2], RetryAfter: time.Duration(vals[3])}, nil
}

// ReleaseLease implements sluice.Leaser: one script call (lua/lease_release.lua).
func (s *Store) ReleaseLease(ctx context.Context, key string, id sluice.LeaseID) error {
	if s.closed.Load() {
		return fmt.Errorf("redis: release lease: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	if err := s.evalScript(ctx, leaseReleaseScript, s.LeaseKey(key), s.leaseParams(), id[:]).Err(); err != nil {
		return unavailable(err)
	}
	return nil
}

// ClearLeases implements sluice.LeaseClearer: one script call (lua/lease_clear.lua).
func (s *Store) ClearLeases(ctx context.Context, key string) (int64, error) {
	if s.closed.Load() {
		return 0, fmt.Errorf("redis: clear leases: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	n, err := s.evalScript(ctx, leaseClearScript, s.LeaseKey(key), s.leaseParams()).Int64()
	if err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}

// RenewLeases implements sluice.Leaser: one script call (lua/lease_renew.lua) per key and
// lease time, all in one pipeline (on a Cluster, one per node, sent in parallel), bounded by
// ctx and the store's timeout.
func (s *Store) RenewLeases(ctx context.Context, batch []sluice.LeaseRenewal) error {
	if s.closed.Load() {
		return fmt.Errorf("redis: renew leases: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	type group struct {
		items []int
		cmd   noRetry
	}
	type groupKey struct {
		key   string
		lease time.Duration
	}
	groups := map[groupKey]*group{}
	var order []*group
	for i := range batch {
		r := &batch[i]
		r.Held = false
		if r.Err = r.Validate(s.cfg.maxKeyLen); r.Err != nil {
			continue
		}
		k := groupKey{r.Key, r.Lease}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k], order = g, append(order, g)
		}
		g.items = append(g.items, i)
	}
	if len(order) == 0 {
		return nil
	}
	pipe := s.client.Pipeline()
	for _, g := range order {
		first := &batch[g.items[0]]
		args := make([]any, 0, 5+len(g.items))
		args = append(args, "evalsha", leaseRenewScript.sha, 1, s.LeaseKey(first.Key), s.leaseParams(leaseMillis(first.Lease)))
		for _, i := range g.items {
			args = append(args, batch[i].ID[:])
		}
		g.cmd = noRetry{goredis.NewCmd(ctx, args...)}
		_ = pipe.Process(ctx, g.cmd)
	}
	_, _ = pipe.Exec(ctx)
	var again goredis.Pipeliner
	for _, g := range order {
		if err := g.cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if again == nil {
				again = s.client.Pipeline()
			}
			args := g.cmd.Args()
			args[0], args[1] = "eval", leaseRenewScript.src
			g.cmd = noRetry{goredis.NewCmd(ctx, args...)}
			_ = again.Process(ctx, g.cmd)
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	for _, g := range order {
		held, err := g.cmd.Int64Slice()
		switch {
		case err != nil && isRedisError(err):
			for _, i := range g.items {
				batch[i].Err = fmt.Errorf("redis: %w: %w", sluice.ErrStoreUnavailable, err) // never the key: it may hold a request's value
			}
		case err != nil:
			return unavailable(err)
		default:
			for j, i := range g.items {
				batch[i].Held = j < len(held) && held[j] == 1
			}
		}
	}
	return nil
}

// evalScript runs sc on key with args in one call: EVALSHA, then EVAL if Redis does not know
// the script (NOSCRIPT). The call is never retried.
func (s *Store) evalScript(ctx context.Context, sc *script, key string, args ...any) *goredis.Cmd {
	cmd := noRetry{goredis.NewCmd(ctx, append([]any{"evalsha", sc.sha, 1, key}, args...)...)}
	_ = s.client.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = noRetry{goredis.NewCmd(ctx, append([]any{"eval", sc.src, 1, key}, args...)...)}
		_ = s.client.Process(ctx, cmd)
	}
	return cmd.Cmd
}

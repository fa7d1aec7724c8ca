package redis

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

var (
	//go:embed lua/counters/window_counts.lua
	windowCountsLua string
	//go:embed lua/counters/heartbeat.lua
	heartbeatLua string

	windowCountsSHA = sha1Hex(windowCountsLua)
	heartbeatSHA    = sha1Hex(heartbeatLua)
)

var (
	_ sluice.WindowCounter = (*Store)(nil)
	_ sluice.Heartbeater   = (*Store)(nil)
)

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// windowKey is the Redis key of one window counter: the key's hash tag, so every window of a
// key lives in one Cluster slot, then ":w:<length ms>:<index>".
func (s *Store) windowKey(userKey string, length time.Duration, idx int64) string {
	return s.Key(userKey) + ":w:" + strconv.FormatInt(int64(length/time.Millisecond), 10) + ":" + strconv.FormatInt(idx, 10)
}

// AddWindowCounts implements sluice.WindowCounter: one EVALSHA of lua/counters/window_counts.lua
// per key (INCRBY + PEXPIRE per non-zero delta, GET otherwise), all in one pipeline, bounded
// by the store's timeout. Script calls are not retried (an INCRBY whose reply was lost may
// have committed); NOSCRIPT is answered with EVAL.
func (s *Store) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	if s.closed.Load() {
		return fmt.Errorf("redis: add window counts: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	cmds := make([]noRetry, len(batch))
	pipe := s.client.Pipeline()
	live := 0
	for i := range batch {
		item := &batch[i]
		if item.Err = item.Validate(s.cfg.maxKeyLen); item.Err != nil {
			continue
		}
		args := make([]any, 0, 3+2*len(item.Deltas)+1)
		args = append(args, "evalsha", windowCountsSHA, len(item.Deltas))
		for j := range item.Deltas {
			args = append(args, s.windowKey(item.Key, item.Length, item.First+int64(j)))
		}
		ttl := max(1, (item.TTL+time.Millisecond-1)/time.Millisecond)
		args = append(args, int64(ttl))
		for _, d := range item.Deltas {
			args = append(args, d)
		}
		cmds[i] = noRetry{goredis.NewCmd(ctx, args...)}
		_ = pipe.Process(ctx, cmds[i])
		live++
	}
	if live == 0 {
		return nil
	}
	_, _ = pipe.Exec(ctx)
	var again goredis.Pipeliner
	for i, cmd := range cmds {
		if cmd.Cmd != nil && cmd.Err() != nil && goredis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			if again == nil {
				again = s.client.Pipeline()
			}
			args := cmd.Args()
			args[0], args[1] = "eval", windowCountsLua
			cmds[i] = noRetry{goredis.NewCmd(ctx, args...)}
			_ = again.Process(ctx, cmds[i])
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	return s.readTotals(ctx, batch, cmds)
}

// readTotals fills in the totals; a transport failure (every command failed alike, or the
// context ended) is the call's error, a Redis error on one item that item's Err.
func (s *Store) readTotals(ctx context.Context, batch []sluice.WindowCounts, cmds []noRetry) error {
	if err := ctx.Err(); err != nil {
		return unavailable(err)
	}
	for i, cmd := range cmds {
		if cmd.Cmd == nil {
			continue
		}
		vals, err := cmd.Int64Slice()
		switch {
		case err != nil && isRedisError(err):
			batch[i].Err = fmt.Errorf("redis: %w: %w", sluice.ErrStoreUnavailable, err) // never the key: it may hold a request's value
		case err != nil:
			return unavailable(err)
		case len(vals) != len(batch[i].Totals):
			batch[i].Err = fmt.Errorf("redis: %w: %d totals, want %d", sluice.ErrStoreUnavailable, len(vals), len(batch[i].Totals))
		default:
			copy(batch[i].Totals, vals)
		}
	}
	return nil
}

// isRedisError reports an error reply from Redis (as opposed to a transport failure).
func isRedisError(err error) bool {
	_, ok := err.(goredis.Error)
	return ok && err != goredis.Nil
}

// Heartbeat implements sluice.Heartbeater with lua/counters/heartbeat.lua: a sorted set
// per group, "<prefix>instances:{<group>}", scored by each instance's expiry in server time.
func (s *Store) Heartbeat(ctx context.Context, group, instance string, ttl time.Duration) (int, error) {
	if instance == "" {
		return 0, fmt.Errorf("%w: instance: empty", sluice.ErrInvalidKey)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: ttl: must be positive, got %v", sluice.ErrInvalidRule, ttl)
	}
	if s.closed.Load() {
		return 0, fmt.Errorf("redis: heartbeat: %w", sluice.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	key := redisKey(s.cfg.prefix+"instances:", group)
	ms := int64(max(1, (ttl+time.Millisecond-1)/time.Millisecond))
	cmd := noRetry{goredis.NewCmd(ctx, "evalsha", heartbeatSHA, 1, key, instance, ms)}
	_ = s.client.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = noRetry{goredis.NewCmd(ctx, "eval", heartbeatLua, 1, key, instance, ms)}
		_ = s.client.Process(ctx, cmd)
	}
	n, err := cmd.Int64()
	if err != nil {
		return 0, unavailable(err)
	}
	return int(n), nil
}

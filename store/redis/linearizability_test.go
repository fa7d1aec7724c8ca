package redis_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// Linearizability (issue 16, item 1): concurrent decisions on one key, recorded as
// invocation/response intervals, are checked with porcupine against a sequential model. The
// rules are chosen so that the model is exact and needs no clock: a fixed window of sluice.MaxPeriod
// (on Redis's TIME; windows are aligned on multiples of the period, so a run crosses a
// boundary once in 366 days) and a token bucket on a client clock that never moves (no refill) are
// both a counter that admits while used + n <= limit. A call that failed (timed out while
// Redis was stopped) may or may not have run: its outcome is unknown and its response time
// infinite, so the model lets it have counted or not.

// takeOutput is what a decision answered; known is false for a call that failed.
type takeOutput struct {
	known, allowed bool
	remaining      int64
}

// counterModel is the sequential specification of a limit-L counter under takes of n.
func counterModel(limit int64) porcupine.Model {
	return (&porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{int64(0)} },
		Step: func(state, input, output interface{}) []interface{} {
			used, n, out := state.(int64), input.(int64), output.(takeOutput)
			fits := used+n <= limit
			switch {
			case !out.known && fits:
				return []interface{}{used + n, used}
			case !out.known:
				return []interface{}{used}
			case fits && out.allowed && out.remaining == limit-used-n:
				return []interface{}{used + n}
			case !fits && !out.allowed && out.remaining == limit-used:
				return []interface{}{used}
			}
			return nil
		},
		DescribeOperation: func(input, output interface{}) string {
			return fmt.Sprintf("take(%d) -> %+v", input, output)
		},
	}).ToModel()
}

// recordTakes runs clients goroutines each taking 1 from key ops times, and returns the
// history; during, if set, runs meanwhile (e.g. stopping Redis).
func recordTakes(t *testing.T, s *redis.Store, rule sluice.Rule, clients, ops int, during func()) []porcupine.Operation {
	t.Helper()
	base := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for id := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				call := time.Since(base).Nanoseconds()
				d, err := s.Take(context.Background(), sluice.Request{Key: "lin", Rule: rule, N: 1})
				ret := time.Since(base).Nanoseconds()
				out := takeOutput{known: true, allowed: d.Allowed, remaining: d.Remaining}
				if err != nil {
					out, ret = takeOutput{}, math.MaxInt64
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: id, Input: int64(1), Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	if during != nil {
		during()
	}
	wg.Wait()
	return history
}

// checkLinearizable fails the test unless history is linearizable under a limit-L counter.
func checkLinearizable(t *testing.T, history []porcupine.Operation, limit int64) {
	t.Helper()
	var unknown, allowed int
	for _, op := range history {
		o := op.Output.(takeOutput)
		if !o.known {
			unknown++
		} else if o.allowed {
			allowed++
		}
	}
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(counterModel(limit), history, 30*time.Second)
	t.Logf("%d operations (%d admitted, %d with unknown outcome), limit %d: %s in %v", len(history), allowed, unknown, limit, res, time.Since(start).Round(time.Millisecond))
	if res != porcupine.Ok {
		t.Errorf("history is %s, not linearizable under the sequential model", res)
	}
}

func linearizabilityRules() map[string]struct {
	rule sluice.Rule
	opts []redis.Option
} {
	return map[string]struct {
		rule sluice.Rule
		opts []redis.Option
	}{
		"fixed_window (server TIME)":  {sluice.FixedWindow(100, sluice.MaxPeriod), nil},
		"token_bucket (frozen clock)": {sluice.TokenBucket(100, time.Hour, 100), []redis.Option{redis.WithClock(sluicetest.NewManualClock(t0))}},
		"gcra (frozen clock)":         {sluice.GCRA(100, time.Hour, 100), []redis.Option{redis.WithClock(sluicetest.NewManualClock(t0))}},
	}
}

// TestLinearizable: 8 clients, 25 decisions each, on the shared Redis (250 with SLUICE_CHAOS).
func TestLinearizable(t *testing.T) {
	ops := 25
	if testenv.Chaos() {
		ops = 250
	}
	for name, tc := range linearizabilityRules() {
		t.Run(name, func(t *testing.T) {
			s := newStore(t, standalone(t), tc.opts...)
			checkLinearizable(t, recordTakes(t, s, tc.rule, 8, ops, nil), tc.rule.Limit)
		})
	}
}

// TestLinearizableStopped: the same while a Redis of the test's own is SIGSTOPped for
// 300 ms and SIGCONTed, twice; calls time out after 100 ms.
func TestLinearizableStopped(t *testing.T) {
	ops := 40
	if testenv.Chaos() {
		ops = 200
	}
	srv := testenv.StartRedis(t)
	for name, tc := range linearizabilityRules() {
		t.Run(name, func(t *testing.T) {
			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { c.Close() }) // after the store's cleanup, which checks the TTLs
			s := newStore(t, c, append([]redis.Option{redis.WithTimeout(100 * time.Millisecond)}, tc.opts...)...)
			history := recordTakes(t, s, tc.rule, 8, ops, func() {
				for range 2 {
					time.Sleep(20 * time.Millisecond)
					srv.Signal(syscall.SIGSTOP)
					time.Sleep(300 * time.Millisecond)
					srv.Signal(syscall.SIGCONT)
				}
			})
			checkLinearizable(t, history, tc.rule.Limit)
		})
	}
}

// TestCounterModelRejects: the model is not vacuous: two admissions one after the other that
// both report the same remaining count, or an admission past the limit, are illegal.
func TestCounterModelRejects(t *testing.T) {
	op := func(call, ret int64, allowed bool, remaining int64) porcupine.Operation {
		return porcupine.Operation{Input: int64(1), Call: call, Return: ret, Output: takeOutput{known: true, allowed: allowed, remaining: remaining}}
	}
	for name, h := range map[string][]porcupine.Operation{
		"same remaining twice": {op(0, 1, true, 1), op(2, 3, true, 1)},
		"past the limit":       {op(0, 1, true, 1), op(2, 3, true, 0), op(4, 5, true, 0)},
		"denied with room":     {op(0, 1, false, 2)},
	} {
		if porcupine.CheckOperations(counterModel(2), h) {
			t.Errorf("%s: accepted", name)
		}
	}
	if !porcupine.CheckOperations(counterModel(2), []porcupine.Operation{op(0, 5, true, 0), op(1, 4, true, 1)}) {
		t.Error("two overlapping admissions in either order: rejected")
	}
}

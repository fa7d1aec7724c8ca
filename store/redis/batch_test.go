package redis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
	"github.com/sluicehq/sluice/store/storetest"
)

// TestScriptsAssembled: every algorithm's script is assembled from the prelude and its file,
// and every algorithm but the sliding log has a batched variant.
func TestScriptsAssembled(t *testing.T) {
	for _, sc := range redis.Scripts() {
		name, src, multi := redis.ScriptInfo(sc)
		if !strings.Contains(src, "local MAXD =") || !strings.Contains(src, "\nlocal key = KEYS[1]\n") {
			t.Errorf("%s: the script lacks the prelude", name)
		}
		if (multi == "") != (name == "sliding_log") {
			t.Errorf("%s: batched variant %v", name, multi != "")
		}
		if multi != "" && (!strings.Contains(multi, "local function decide(") || strings.Contains(multi, "\nlocal key = KEYS[1]\n") ||
			!strings.Contains(multi, "table.concat(out)")) {
			t.Errorf("%s: the batched variant is not assembled from lua/multi.lua", name)
		}
		for _, mark := range []string{"--@single", "--@decide", "--@body"} {
			if strings.Contains(src, "\n"+mark+"\n") || strings.Contains(multi, "\n"+mark+"\n") {
				t.Errorf("%s: marker %s left in the script", name, mark)
			}
		}
	}
}

// TestSlot: the store's hash slots are Redis Cluster's (the reference value of the Cluster
// specification, and CLUSTER KEYSLOT when a Cluster is configured).
func TestSlot(t *testing.T) {
	for key, want := range map[string]uint16{"123456789": 12739, "{123456789}x": 12739, "x{}123456789": redis.Slot("x{}123456789")} {
		if got := redis.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if os.Getenv("SLUICE_REDIS_CLUSTER_ADDRS") == "" && os.Getenv("CI") == "" {
		return
	}
	c := clusterClient(t).(*goredis.ClusterClient)
	s := newStore(t, c)
	for _, k := range []string{"", "a", "{a}", "a}{", "}", "{", `\{a\}`, "x{y}z", "{}", "{{}}", "ünï", "k17"} {
		for _, key := range []string{s.Key(k), k, "p{" + k + "}q{r}"} {
			want, err := c.ClusterKeySlot(context.Background(), key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := redis.Slot(key); int64(got) != want {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
			}
		}
	}
}

// sameSlotKeys returns n user keys whose Redis keys in s share one Cluster slot.
func sameSlotKeys(s *redis.Store, n int) []string {
	bySlot := map[uint16][]string{}
	for i := 0; ; i++ {
		k := "s" + strconv.Itoa(i)
		sl := redis.Slot(s.Key(k))
		bySlot[sl] = append(bySlot[sl], k)
		if len(bySlot[sl]) == n {
			return bySlot[sl]
		}
	}
}

// batchDifferential drives a store whose batches are forced (TakeBatch), the same store's
// calls one at a time (Take, on other keys) and the memory store with the same random
// requests, and wants the same decisions: a batch of K decisions, one batched script call per
// algorithm and slot, decides each key as K calls in queue order do. The batches mix
// algorithms (a key switching algorithm within a batch included), repeat keys, and put keys of
// one Cluster slot together as well as keys of many slots. After a key switched algorithm it
// is compared with the one-at-a-time calls only: the memory store then keeps a state that is
// back to full, which Redis need not keep, and a clock stepping back tells them apart (the
// memory store's sweep forgets such states too).
func batchDifferential(t *testing.T, c goredis.UniversalClient) {
	rng := storetest.Rand(t, 2)
	clock := sluicetest.NewManualClock(t0)
	rs := newStore(t, c, redis.WithClock(clock))
	seq := newStore(t, c, redis.WithClock(clock))
	ms, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := append(sameSlotKeys(rs, 5), "a", "b", "c{", "d}")
	algs := sluice.Algorithms()
	type keyState struct {
		rule     sluice.Rule
		switched bool // the key has changed algorithm
	}
	state := map[string]*keyState{}
	for _, k := range keys {
		state[k] = &keyState{rule: storetest.RandomRule(rng, algs[rng.IntN(len(algs))])}
	}
	batches := 150
	if testing.Short() {
		batches = 40
	}
	type step struct {
		at       time.Time
		req      sluice.Request
		switched bool
	}
	now := t0
	hist := map[string][]string{} // each key's calls, for failure messages
	prec := map[string]*luaPrecision{}
	for b := 0; b < batches; b++ {
		n := 2 + rng.IntN(40)
		steps := make([]step, n)
		for i := range steps {
			k := keys[rng.IntN(len(keys))]
			if i > 0 && rng.IntN(3) == 0 {
				k = steps[i-1].req.Key // runs on one key
			}
			st := state[k]
			if rng.IntN(30) == 0 {
				r := storetest.RandomRule(rng, algs[rng.IntN(len(algs))]) // another algorithm, or rule
				st.switched = st.switched || r.Algorithm != st.rule.Algorithm
				st.rule = r
			}
			if rng.IntN(4) == 0 {
				now = now.Add(storetest.RandomStep(rng, st.rule))
			}
			req := sluice.Request{Key: k, Rule: st.rule, N: storetest.RandomN(rng, st.rule)}
			if rng.IntN(6) == 0 {
				req.Settle, req.N = true, storetest.RandomSettle(rng, st.rule)
			} else if st.rule.Algorithm.Bucket() && rng.IntN(4) == 0 {
				req.MaxDelay = time.Duration(rng.Int64N(2*int64(st.rule.Period)/int64(time.Millisecond)+1)) * time.Millisecond
			}
			steps[i] = step{at: now, req: req, switched: st.switched}
		}
		want, alone := make([]sluice.Decision, n), make([]sluice.Decision, n)
		for i, st := range steps {
			clock.Set(st.at)
			if want[i], err = ms.Take(ctx, st.req); err != nil {
				t.Fatal(err)
			}
			if alone[i], err = seq.Take(ctx, st.req); err != nil {
				t.Fatal(err)
			}
		}
		got, errs := redis.TakeBatch(ctx, rs, n, func(i int) sluice.Request {
			clock.Set(steps[i].at)
			return steps[i].req
		})
		for i, st := range steps {
			if errs[i] != nil {
				t.Fatalf("batch %d call %d: %v", b, i, errs[i])
			}
			h := append(hist[st.req.Key], fmt.Sprintf("  batch %d call %d at +%v: %s n=%d maxDelay=%v settle=%v: %+v", b, i,
				st.at.Sub(t0), st.req.Rule, st.req.N, st.req.MaxDelay, st.req.Settle, want[i]))
			hist[st.req.Key] = h
			pr := prec[st.req.Key]
			if pr == nil {
				pr = &luaPrecision{}
				prec[st.req.Key] = pr
			}
			pr.observe(got[i], alone[i], want[i])
			if !pr.same(got[i], alone[i]) || !st.switched && !pr.same(got[i], want[i]) {
				t.Fatalf("batch %d call %d, key %q:\n batched  %+v\n alone    %+v\n memory   %+v\nthe key's last calls (memory's decisions):\n%s",
					b, i, st.req.Key, got[i], alone[i], want[i], strings.Join(h[max(0, len(h)-10):], "\n"))
			}
		}
	}
	if redis.BatchedDecisions(rs) == 0 {
		t.Error("no decision was made by a batched script call")
	}
	checkTTLs(t, c, prefixOf(rs), false)
}

func TestBatchDifferentialStandalone(t *testing.T) { batchDifferential(t, standalone(t)) }
func TestBatchDifferentialCluster(t *testing.T)    { batchDifferential(t, clusterClient(t)) }

// batchConcurrency: 64 goroutines x 5L requests on one key admit exactly L with every
// decision going through the workers (no direct path) and a batch delay, so that the workers
// send batched script calls; no key is left without a TTL.
func batchConcurrency(t *testing.T, newClient func(testing.TB) goredis.UniversalClient) {
	clock := sluicetest.NewManualClock(t0)
	c := newClient(t)
	s := newStore(t, c, redis.WithClock(clock), redis.WithoutDirectPath(), redis.WithMaxBatchDelay(200*time.Microsecond))
	admitExactly(t, []*sluice.Limiter{sluice.New(s)})
	if n := redis.BatchedDecisions(s); n < 100 {
		t.Errorf("%d decisions made by batched script calls, want many", n)
	}
	checkTTLs(t, c, prefixOf(s), false)
}

func TestBatchConcurrencyStandalone(t *testing.T) { batchConcurrency(t, standalone) }
func TestBatchConcurrencyCluster(t *testing.T)    { batchConcurrency(t, clusterClient) }

// TestBatchServerClock: a batch on the server clock reads TIME once and decides in queue order:
// of 10 requests on one key with a limit of 3 per hour, the first 3 are admitted.
func TestBatchServerClock(t *testing.T) {
	c := standalone(t)
	s := newStore(t, c)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		rule := sluice.Rule{Algorithm: a, Limit: 3, Period: time.Hour}
		ds, errs := redis.TakeBatch(ctx, s, 10, func(i int) sluice.Request {
			return sluice.Request{Key: "server-clock-" + a.String(), Rule: rule, N: 1}
		})
		for i, d := range ds {
			if errs[i] != nil || d.Allowed != (i < 3) {
				t.Fatalf("%s call %d: %+v, %v", a, i, d, errs[i])
			}
		}
	}
	if redis.BatchedDecisions(s) != 50 {
		t.Errorf("%d decisions batched, want 50 (all but the sliding log's)", redis.BatchedDecisions(s))
	}
	checkTTLs(t, c, prefixOf(s), false)
}

// TestBatchAlgorithmSwitch: in one batch, calls on one key alternate algorithms; each starts
// from full (as TestAlgorithmSwitch one call at a time), which holds only if the batch keeps
// the key's calls in queue order rather than grouping each algorithm's calls together.
func TestBatchAlgorithmSwitch(t *testing.T) {
	for name, newClient := range map[string]func(testing.TB) goredis.UniversalClient{"standalone": standalone, "cluster": clusterClient} {
		t.Run(name, func(t *testing.T) {
			clock := sluicetest.NewManualClock(t0)
			s := newStore(t, newClient(t), redis.WithClock(clock))
			algs := []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket, sluice.AlgorithmFixedWindow,
				sluice.AlgorithmSlidingWindow, sluice.AlgorithmLeakyBucket, sluice.AlgorithmSlidingLog}
			keys := sameSlotKeys(s, 2)
			n := 4 * len(algs)
			ds, errs := redis.TakeBatch(context.Background(), s, n, func(i int) sluice.Request {
				r := sluice.Rule{Algorithm: algs[(i/2)%len(algs)], Limit: 3, Period: time.Second}
				return sluice.Request{Key: keys[i%2], Rule: r, N: 2}
			})
			for i, d := range ds {
				if errs[i] != nil || !d.Allowed || d.Remaining != 1 {
					t.Fatalf("call %d (%s): %+v, %v; want allowed with 1 remaining", i, algs[(i/2)%len(algs)], d, errs[i])
				}
			}
			if redis.BatchedDecisions(s) == 0 {
				t.Error("no decision was made by a batched script call")
			}
		})
	}
}

// TestBatchOrderAfterNoScript: a key decided under two algorithms in one batch keeps its queue
// order even when some of the scripts are not loaded on the server. The sliding log's script
// is loaded and the batched GCRA script is not, so a pipeline holding both would see the GCRA
// call fail with NOSCRIPT and run again after the second sliding log call, which would then
// find the first one's log instead of GCRA's fresh state.
func TestBatchOrderAfterNoScript(t *testing.T) {
	for name, newClient := range map[string]func(testing.TB) goredis.UniversalClient{"standalone": standalone, "cluster": clusterClient} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newClient(t)
			clock := sluicetest.NewManualClock(t0)
			s := newStore(t, c, redis.WithClock(clock))
			keys := sameSlotKeys(s, 2)
			flush := func(ctx context.Context, node *goredis.Client) error { return node.ScriptFlush(ctx).Err() }
			var err error
			if cc, ok := c.(*goredis.ClusterClient); ok {
				err = cc.ForEachMaster(ctx, flush)
			} else {
				err = flush(ctx, c.(*goredis.Client))
			}
			if err != nil {
				t.Fatal(err)
			}
			log, gcra := sluice.Rule{Algorithm: sluice.AlgorithmSlidingLog, Limit: 3, Period: time.Second}, sluice.GCRA(3, time.Second, 0)
			// load the sliding log's script on the keys' node, through a key of the same slot
			if _, err := s.Take(ctx, sluice.Request{Key: keys[1], Rule: log, N: 0}); err != nil {
				t.Fatal(err)
			}
			reqs := []sluice.Request{
				{Key: keys[0], Rule: log, N: 2},
				{Key: keys[0], Rule: gcra, N: 2}, // a new algorithm: starts from full
				{Key: keys[1], Rule: gcra, N: 2}, // makes the GCRA calls one batched call
				{Key: keys[0], Rule: log, N: 2},  // again a new algorithm: full
			}
			ds, errs := redis.TakeBatch(ctx, s, len(reqs), func(i int) sluice.Request { return reqs[i] })
			for i, d := range ds {
				if errs[i] != nil || !d.Allowed || d.Remaining != 1 {
					t.Errorf("call %d (%s): %+v, %v; want allowed with 1 remaining", i, reqs[i].Rule.Algorithm, d, errs[i])
				}
			}
		})
	}
}

// TestCloseWhileTaking: decisions racing Close all end, with a decision, ErrClosed or
// ErrStoreUnavailable (none is left waiting on a queue no worker reads).
func TestCloseWhileTaking(t *testing.T) {
	c := standalone(t)
	for round := 0; round < 20; round++ {
		s, err := redis.New(c, redis.WithPrefix(testPrefix(t, c)), redis.WithTimeout(testTimeout), redis.WithoutDirectPath())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 64)
		for g := 0; g < 64; g++ {
			go func() {
				var err error
				for i := 0; i < 50 && err == nil; i++ {
					_, err = s.Take(context.Background(), sluice.Request{Key: "k", Rule: sluice.GCRA(1000, time.Second, 0), N: 1})
				}
				done <- err
			}()
		}
		time.Sleep(time.Duration(round) * 100 * time.Microsecond)
		_ = s.Close()
		timeout := time.After(10 * time.Second)
		for g := 0; g < 64; g++ {
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, sluice.ErrClosed) && !errors.Is(err, sluice.ErrStoreUnavailable) {
					t.Fatalf("round %d: %v", round, err)
				}
			case <-timeout:
				t.Fatalf("round %d: %d goroutines still in Take 10 s after Close", round, 64-g)
			}
		}
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/store/memcached"
)

// The memcached workloads: Sluice's memcached store (counter algorithms on incr, the others a
// gets/cas loop with concurrent decisions on a key coalesced into one round) against a naive
// gets/cas loop (one round per decision, retried at once on a conflict, as seed 000 describes)
// and raw incr (one increment per decision, no decision at all), on one hot key and on 10k
// keys, with 1 and 64 goroutines, same memcached, same run. They read SLUICE_MEMCACHED_ADDR and
// skip when it is unset (see docs/BENCHMARKS.md, section Memcached):
//
//	cd bench && SLUICE_MEMCACHED_ADDR=127.0.0.1:11211 go test -run '^$' -bench MemcachedThroughput -benchtime 1s

func memcacheClient(b *testing.B) *memcache.Client {
	addr := os.Getenv("SLUICE_MEMCACHED_ADDR")
	if addr == "" {
		b.Skip("SLUICE_MEMCACHED_ADDR is not set")
	}
	c := memcache.New(addr)
	c.Timeout = time.Second
	c.MaxIdleConns = 128
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// mcContender makes one decision on key; conflicts reports its CAS conflicts so far.
type mcContender struct {
	name      string
	decide    func(key string) (bool, error)
	conflicts func() int64
}

// mcPeriod is the period of the contenders' rules (PERIOD, default one second), with a limit
// of 10^6 per period: every decision is admitted. A window counter is created (incr, then add)
// by the first decision in its window, so with 10k keys a one-second period makes most
// decisions the first of their key's window, a minute almost none.
func mcPeriod() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("PERIOD")); err == nil && d > 0 {
		return d
	}
	return time.Second
}

func mcContenders(b *testing.B, c *memcache.Client, prefix string) []mcContender {
	var out []mcContender
	period := mcPeriod()
	for _, a := range []sluice.Algorithm{sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow,
		sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket} {
		s, err := memcached.New(c, memcached.WithPrefix(prefix+"s"+strconv.Itoa(int(a))+":"), memcached.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		l := sluice.New(s)
		rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: period}
		out = append(out, mcContender{
			name: "sluice/" + a.String(),
			decide: func(key string) (bool, error) {
				d, err := l.Allow(context.Background(), key, rule)
				return d.Allowed, err
			},
			conflicts: func() int64 { return s.Stats().CASConflicts },
		})
	}
	for _, a := range []sluice.Algorithm{sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket} {
		n := &naiveCAS{c: c, prefix: prefix + "n" + strconv.Itoa(int(a)) + ":",
			params: algorithm.Compile(sluice.Rule{Algorithm: a, Limit: perSecond, Period: period})}
		out = append(out, mcContender{name: "naive_cas/" + a.String(), decide: n.decide, conflicts: n.conflicts.Load})
	}
	out = append(out, mcContender{
		name: "raw_incr",
		decide: func(key string) (bool, error) {
			k := prefix + "i:" + key
			_, err := c.Increment(k, 1)
			if errors.Is(err, memcache.ErrCacheMiss) {
				err = c.Add(&memcache.Item{Key: k, Value: []byte("1"), Expiration: 60})
				if errors.Is(err, memcache.ErrNotStored) {
					_, err = c.Increment(k, 1)
				}
			}
			return true, err
		},
		conflicts: func() int64 { return 0 },
	})
	return out
}

// naiveCAS is the plain optimistic loop: gets the state, decide with package algorithm, cas
// it back, and on a conflict start again at once, for as long as it takes.
type naiveCAS struct {
	c         *memcache.Client
	prefix    string
	params    algorithm.Params
	conflicts atomic.Int64
}

func (n *naiveCAS) decide(key string) (bool, error) {
	k := n.prefix + key
	for {
		it, err := n.c.Get(k)
		var st algorithm.State
		switch {
		case err == nil:
			st, err = algorithm.DecodeState(it.Value)
			if err != nil {
				return false, err
			}
		case errors.Is(err, memcache.ErrCacheMiss):
			it, st = nil, algorithm.New(n.params.Rule.Algorithm)
		default:
			return false, err
		}
		d := st.Take(time.Now().UnixNano(), &n.params, 1, 0)
		v := algorithm.AppendState(nil, st)
		if it == nil {
			err = n.c.Add(&memcache.Item{Key: k, Value: v, Expiration: 60})
		} else {
			it.Value, it.Expiration = v, 60
			err = n.c.CompareAndSwap(it)
		}
		switch {
		case err == nil:
			return d.Allowed, nil
		case errors.Is(err, memcache.ErrCASConflict), errors.Is(err, memcache.ErrNotStored), errors.Is(err, memcache.ErrCacheMiss):
			n.conflicts.Add(1)
		default:
			return false, err
		}
	}
}

// BenchmarkMemcachedThroughput: decisions/s (and p50, p99, CAS conflicts per decision) with 1
// and 64 goroutines, on one hot key and on 10k keys, with a limit high enough that every
// decision is admitted. Repeat the whole command to interleave the contenders' runs.
func BenchmarkMemcachedThroughput(b *testing.B) {
	c := memcacheClient(b)
	prefix := fmt.Sprintf("bench:%x:", time.Now().UnixNano())
	cts := mcContenders(b, c, prefix)
	for _, hot := range []bool{true, false} {
		shape := "keys=10k"
		if hot {
			shape = "keys=1"
		}
		for _, g := range []int{1, 64} {
			for _, ct := range cts {
				b.Run(fmt.Sprintf("%s/goroutines=%d/%s", shape, g, ct.name), func(b *testing.B) {
					decide := func(_ context.Context, key string) (bool, error) {
						if hot {
							key = "hot"
						}
						return ct.decide(key)
					}
					before := ct.conflicts()
					runLatency(b, g, decide)
					b.ReportMetric(float64(ct.conflicts()-before)/float64(b.N), "conflicts/decision")
				})
			}
		}
	}
}

// BenchmarkMemcachedInterleaved is BenchmarkMemcachedThroughput for a busy machine: for each
// workload (one hot key or 10k keys; 1 or 64 goroutines) it runs every contender for a short
// slice (SLICE, default 300ms) in turn, ROUNDS times (default 5), so that load from other jobs
// hits all contenders alike, and reports each contender's median decisions/s, its median
// per-round ratio to the naive gets/cas loop of its algorithm (vs-naive) and to raw incr
// (vs-incr), and its CAS conflicts per decision. Before the 10k-key workloads every contender
// decides each key once, so that the rounds see existing counters and states (with PERIOD=1s
// most of them are gone again within the run, as in a sparse stream). Run it with
// -benchtime 1x:
//
//	cd bench && SLUICE_MEMCACHED_ADDR=127.0.0.1:11211 go test -run '^$' -bench MemcachedInterleaved -benchtime 1x
//	cd bench && PERIOD=1m SLUICE_MEMCACHED_ADDR=127.0.0.1:11211 go test -run '^$' -bench MemcachedInterleaved -benchtime 1x
func BenchmarkMemcachedInterleaved(b *testing.B) {
	c := memcacheClient(b)
	rounds, slice := 5, 300*time.Millisecond
	if v, err := strconv.Atoi(os.Getenv("ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLICE")); err == nil && v > 0 {
		slice = v
	}
	cts := mcContenders(b, c, fmt.Sprintf("bench:%x:", time.Now().UnixNano()))
	index := map[string]int{}
	for i, ct := range cts {
		index[ct.name] = i
	}
	for _, hot := range []bool{true, false} {
		shape := "keys=10k"
		if hot {
			shape = "keys=1"
		}
		for _, g := range []int{1, 64} {
			if !hot && g == 1 {
				for _, ct := range cts {
					warm(ct.decide)
				}
			}
			rates := make([][]float64, len(cts))
			conflicts := make([]int64, len(cts))
			decisions := make([]int64, len(cts))
			for range rounds {
				for i, ct := range cts {
					before := ct.conflicts()
					n := runFor(slice, g, hot, ct.decide)
					rates[i] = append(rates[i], float64(n)/slice.Seconds())
					conflicts[i] += ct.conflicts() - before
					decisions[i] += n
				}
			}
			for i, ct := range cts {
				b.Run(fmt.Sprintf("%s/goroutines=%d/%s", shape, g, ct.name), func(b *testing.B) {
					b.ReportMetric(median(rates[i]), "decisions/s")
					b.ReportMetric(float64(conflicts[i])/float64(max(1, decisions[i])), "conflicts/decision")
					b.ReportMetric(medianRatio(rates[i], rates[index["raw_incr"]]), "vs-incr")
					if _, alg, ok := strings.Cut(ct.name, "/"); ok {
						if j, ok := index["naive_cas/"+alg]; ok {
							b.ReportMetric(medianRatio(rates[i], rates[j]), "vs-naive")
						}
					}
				})
			}
		}
	}
}

// warm makes one decision on each of the 10k keys, so that the rounds measure keys whose
// counters (and states) exist, as in a steady stream, rather than their creation.
func warm(decide func(key string) (bool, error)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				_, _ = decide(keys[i])
			}
		}()
	}
	wg.Wait()
}

// runFor makes decisions from g goroutines for d (on the key "hot", or round the 10k keys) and
// returns how many were made; an error fails the benchmark's process.
func runFor(d time.Duration, g int, hot bool, decide func(key string) (bool, error)) int64 {
	var n, errs atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(stop); i += g {
				key := "hot"
				if !hot {
					key = keys[i%len(keys)]
				}
				if _, err := decide(key); err != nil {
					errs.Add(1)
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if errs.Load() > 0 {
		panic(fmt.Sprintf("bench: %d errors", errs.Load()))
	}
	return n.Load()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// medianRatio is the median over rounds of a[i] / b[i].
func medianRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / max(b[i], 1)
	}
	return median(r)
}

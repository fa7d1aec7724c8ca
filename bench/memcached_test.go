package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
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

func mcContenders(b *testing.B, c *memcache.Client, prefix string) []mcContender {
	var out []mcContender
	for _, a := range []sluice.Algorithm{sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow,
		sluice.AlgorithmGCRA, sluice.AlgorithmTokenBucket} {
		s, err := memcached.New(c, memcached.WithPrefix(prefix+"s"+strconv.Itoa(int(a))+":"), memcached.WithTimeout(time.Second))
		if err != nil {
			b.Fatal(err)
		}
		l := sluice.New(s)
		rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
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
			params: algorithm.Compile(sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second})}
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

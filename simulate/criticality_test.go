package simulate_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/simulate"
	"github.com/sluicehq/sluice/store"
)

// At 2x overload the classes are shed lowest first on every algorithm, and CRITICAL_PLUS keeps
// (nearly) all it asks for: its demand, 20/s, is within the holdback above the others' shares.
func TestCriticalityShedsLowestFirst(t *testing.T) {
	rows, err := simulate.RunCriticality(context.Background(), sluice.Algorithms(), 2, 10*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	frac := map[sluice.Algorithm]map[sluice.Criticality]float64{}
	for _, r := range rows {
		if frac[r.Algorithm] == nil {
			frac[r.Algorithm] = map[sluice.Criticality]float64{}
		}
		frac[r.Algorithm][r.Class] = float64(r.Admitted) / float64(r.Offered)
	}
	for a, f := range frac {
		if !(f[sluice.Sheddable] <= f[sluice.SheddablePlus] && f[sluice.SheddablePlus] <= f[sluice.Critical] &&
			f[sluice.Critical] <= f[sluice.CriticalPlus]) || f[sluice.CriticalPlus] < 0.98 || f[sluice.Sheddable] > 0.5 {
			t.Errorf("%v: admitted fractions %v", a, f)
		}
	}
}

// Issue 23 item 7: in the criticality scenario (2x overload) every algorithm admits CRITICAL_PLUS
// and CRITICAL at least 0.95 of their demand and SHEDDABLE at most 0.05 — on memory, and on
// Redis and memcached when SLUICE_REDIS_ADDR and SLUICE_MEMCACHED_ADDR are set. A fixed window
// gave CRITICAL 0.60 and SHEDDABLE 0.25 before its pace (algorithm.TakeHoldback).
func TestCriticalityBounds(t *testing.T) {
	stores := map[string]string{"memory": "memory"}
	if addr := os.Getenv("SLUICE_REDIS_ADDR"); addr != "" {
		stores["redis"] = "redis://" + addr
	}
	if addr := os.Getenv("SLUICE_MEMCACHED_ADDR"); addr != "" {
		stores["memcached"] = "memcached://" + addr
	}
	for name, url := range stores {
		t.Run(name, func(t *testing.T) {
			var open func(sluice.Clock) (sluice.Store, io.Closer, error)
			if name != "memory" {
				run := fmt.Sprintf("sluice-test-criticality:%x:", time.Now().UnixNano())
				var n atomic.Int64
				open = func(clock sluice.Clock) (sluice.Store, io.Closer, error) {
					prefix := fmt.Sprintf("%s%d:", run, n.Add(1))
					return store.Open(context.Background(), store.Config{Backend: store.Backend{URL: url, Clock: clock, Prefix: prefix, Timeout: 10 * time.Second}})
				}
			}
			rows, err := simulate.RunCriticalityOn(context.Background(), open, sluice.Algorithms(), 2, 20*time.Second, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				f := float64(r.Admitted) / float64(r.Offered)
				switch r.Class {
				case sluice.CriticalPlus, sluice.Critical:
					if f < 0.95 {
						t.Errorf("%v %v: admitted %.3f of its demand, want >= 0.95", r.Algorithm, r.Class, f)
					}
				case sluice.Sheddable:
					if f > 0.05 {
						t.Errorf("%v %v: admitted %.3f of its demand, want <= 0.05", r.Algorithm, r.Class, f)
					}
				}
			}
		})
	}
}

package hotkey_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestMemoryFlatWithTenMillionValues: a parameter with 10M distinct values keeps the heap
// and the RSS flat (two sketches of TopK values, whatever the cardinality).
func TestMemoryFlatWithTenMillionValues(t *testing.T) {
	clock := sluicetest.NewManualClock(t0)
	p, err := hotkey.New(sluice.FixedWindow(100, time.Minute), hotkey.Config{TopK: 1000, ColdLimit: 10, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 32)
	observe := func(from, to int) {
		for i := from; i < to; i++ {
			buf = strconv.AppendInt(append(buf[:0], "value-"...), int64(i), 10)
			p.Observe(string(buf), 1)
		}
	}
	observe(0, 100_000) // fill the sketch
	heap0, rss0 := heapInUse(), rss(t)
	total := 10_000_000
	if raceEnabled {
		total = 1_000_000
	}
	observe(100_000, total)
	heap1, rss1 := heapInUse(), rss(t)
	t.Logf("%d distinct values: heap in use %.1f MiB after 100k values, %.1f MiB after all; RSS %.1f -> %.1f MiB",
		total, mib(heap0), mib(heap1), mib(rss0), mib(rss1))
	if heap1 > heap0+4<<20 {
		t.Errorf("heap grew from %.1f to %.1f MiB", mib(heap0), mib(heap1))
	}
	if rss0 > 0 && rss1 > rss0+16<<20 {
		t.Errorf("RSS grew from %.1f to %.1f MiB", mib(rss0), mib(rss1))
	}
	top, _ := p.Tracker().Top(0)
	if len(top) > 2000 {
		t.Errorf("%d values tracked, want at most 2 x TopK", len(top))
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss reads the resident set size from /proc (0 where there is none).
func rss(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

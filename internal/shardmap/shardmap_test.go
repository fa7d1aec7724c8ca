package shardmap

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// until is a test value: an entry that expires at an instant (Pinned: never).
type until int64

func untilRemaining(v until, now int64) int64 {
	if v == Pinned {
		return Pinned
	}
	return int64(v) - now
}

// keysIn returns n distinct keys that m puts in shard sh.
func keysIn(m *Map[until], sh *Shard[until], n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := "k" + strconv.Itoa(i); m.Shard(k) == sh {
			keys = append(keys, k)
		}
	}
	return keys
}

// put stores v under k when k's shard has room at now, as the decorators do.
func put(m *Map[until], k string, v until, now int64) {
	sh := m.Shard(k)
	sh.Lock()
	if sh.MakeRoom(now) {
		sh.Set(k, v)
	}
	sh.Unlock()
}

// fullShard returns a locked shard of a new Map, bounded to perShard entries and full of
// them, and their keys; value gives the i-th key's value.
func fullShard(perShard int, value func(i int) until) (*Shard[until], []string) {
	m := New(perShard*Shards, untilRemaining)
	sh := m.At(3)
	keys := keysIn(m, sh, perShard+1)
	sh.Lock()
	for i, k := range keys[:perShard] {
		sh.Set(k, value(i))
	}
	return sh, keys
}

func TestShardIsPadded(t *testing.T) {
	if a, b := unsafe.Sizeof(Shard[until]{}), unsafe.Sizeof(Shard[[64]byte]{}); a != 128 || b != 128 {
		t.Fatalf("a shard takes %d and %d bytes, want 128 whatever the value type", a, b)
	}
}

func TestSetGetDelete(t *testing.T) {
	m := New(100, untilRemaining)
	for i := range 100 {
		put(m, strconv.Itoa(i), until(i), 0)
	}
	n := m.Len()
	if n == 0 || n > 100 {
		t.Fatalf("Len %d after 100 keys bounded to 100", n)
	}
	sh := m.Shard("7")
	sh.Lock()
	if v, ok := sh.Get("7"); ok && v != 7 {
		t.Errorf("Get(7) = %v", v)
	}
	sh.Delete("7")
	if _, ok := sh.Get("7"); ok {
		t.Error("Get after Delete found the key")
	}
	sh.Unlock()
	m.Clear()
	if n := m.Len(); n != 0 {
		t.Fatalf("Len %d after Clear", n)
	}
}

// A full shard drops the sampled entry with the least time remaining: with no more entries
// than the sample, that is the one with the least remaining of all.
func TestMakeRoomDropsTheSoonest(t *testing.T) {
	for range 50 {
		sh, keys := fullShard(Sample, func(i int) until { return until(100 + 10*((i+5)%Sample)) })
		if !sh.MakeRoom(50) {
			t.Fatal("MakeRoom found no room among live entries")
		}
		soonest := keys[(Sample-5)%Sample] // the entry with 100
		if _, ok := sh.Get(soonest); ok || len(sh.m) != Sample-1 {
			t.Fatalf("MakeRoom kept %s (until 100) or dropped more: %d left", soonest, len(sh.m))
		}
		sh.Set(keys[Sample], 1000)
		if !sh.MakeRoom(50) || len(sh.m) != Sample-1 {
			t.Fatalf("second MakeRoom: %d left", len(sh.m))
		}
		sh.Unlock()
	}
}

// An expired entry is dropped before any live one; Pinned entries are never dropped.
func TestMakeRoomExpiredAndPinned(t *testing.T) {
	for range 50 {
		sh, keys := fullShard(Sample, func(int) until { return Pinned })
		if sh.MakeRoom(0) || len(sh.m) != Sample {
			t.Fatalf("MakeRoom dropped a pinned entry: %d left", len(sh.m))
		}
		sh.Set(keys[4], 10) // expires at 10
		if !sh.MakeRoom(20) {
			t.Fatal("MakeRoom kept an expired entry")
		}
		if _, ok := sh.Get(keys[4]); ok {
			t.Fatal("MakeRoom dropped a pinned entry instead of the expired one")
		}
		sh.Unlock()
	}
}

// With more entries than the sample, the dropped entry is the least remaining of the Sample
// looked at: at least Sample-1 live entries outlast it, whatever the sample.
func TestMakeRoomSamples(t *testing.T) {
	const perShard = 4 * Sample
	dropped := map[int]int{}
	for range 400 {
		sh, keys := fullShard(perShard, func(i int) until { return until(100 + i) })
		if !sh.MakeRoom(0) {
			t.Fatal("no room")
		}
		for i, k := range keys[:perShard] {
			if _, ok := sh.Get(k); !ok {
				dropped[i]++
				if outlast := perShard - 1 - i; outlast < Sample-1 {
					t.Fatalf("dropped entry %d, outlasted by %d entries only", i, outlast)
				}
			}
		}
		sh.Unlock()
	}
	if len(dropped) < 2 {
		t.Errorf("the sample is not random: always dropped %v", dropped)
	}
}

func TestSweep(t *testing.T) {
	m := New(100_000, untilRemaining)
	for i := range 600 {
		v := until(Pinned)
		if i%2 == 0 {
			v = 10
		}
		put(m, strconv.Itoa(i), v, 0)
	}
	for range Shards - 1 {
		m.Sweep(5) // nothing expired yet
	}
	if n := m.Len(); n != 600 {
		t.Fatalf("Len %d after sweeping nothing expired", n)
	}
	for range Shards {
		m.Sweep(10)
	}
	if n := m.Len(); n != 300 {
		t.Fatalf("Len %d after sweeping every shard, want the 300 pinned", n)
	}
}

func TestMarked(t *testing.T) {
	m := New(10, untilRemaining)
	sh := m.At(0)
	sh.Lock()
	defer sh.Unlock()
	sh.Mark(1)
	sh.Mark(2)
	if got := sh.Marked(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("Marked = %v", got)
	}
	sh.ResetMarked()
	if got := sh.Marked(); len(got) != 0 || cap(got) < 2 {
		t.Fatalf("after ResetMarked: %v (cap %d)", got, cap(got))
	}
}

// Concurrent writers, readers, sweeps and Len, under -race; the bound holds throughout.
func TestConcurrentBounded(t *testing.T) {
	const maxKeys = 256
	m := New(maxKeys, untilRemaining)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				k := fmt.Sprint(g, "/", i%700)
				now := int64(i)
				sh := m.Shard(k)
				sh.Lock()
				switch v, ok := sh.Get(k); {
				case ok && i%3 == 0:
					sh.Delete(k)
				case ok:
					sh.Set(k, v+1)
				case sh.MakeRoom(now):
					sh.Set(k, until(now+int64(i%50)))
					sh.Mark(until(now))
				}
				if len(sh.m) > maxKeys/Shards {
					t.Errorf("shard holds %d entries, bound %d", len(sh.m), maxKeys/Shards)
				}
				sh.Unlock()
				if i%100 == 0 {
					m.Sweep(now)
					if n := m.Len(); n > maxKeys {
						t.Errorf("Len %d, bound %d", n, maxKeys)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := m.Len(); n > maxKeys {
		t.Fatalf("Len %d, bound %d", n, maxKeys)
	}
	m.Clear()
	for i := range Shards {
		if len(m.At(i).marked) != 0 {
			t.Fatal("Clear left marks")
		}
	}
}

func TestBoundAtLeastOnePerShard(t *testing.T) {
	m := New(1, untilRemaining)
	for i := range 1000 {
		put(m, strconv.Itoa(i), until(i+1000), int64(i))
	}
	if n := m.Len(); n != Shards {
		t.Fatalf("Len %d, want one per shard (%d)", n, Shards)
	}
}

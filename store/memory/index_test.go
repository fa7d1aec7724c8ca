package memory

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestEntryLayout holds the layout entry's doc comment promises: 128 bytes, the written fields
// in the first cache line and the key in the second, and the states kept in small are plain
// int64 structs that fit it.
func TestEntryLayout(t *testing.T) {
	var e entry
	if n := unsafe.Sizeof(e); n != 128 {
		t.Errorf("entry is %d bytes, want 128", n)
	}
	if off := unsafe.Offsetof(e.small) + unsafe.Sizeof(e.small); off > 64 {
		t.Errorf("small ends at byte %d, past the first cache line", off)
	}
	if off := unsafe.Offsetof(e.key); off != 64 {
		t.Errorf("key at byte %d, want 64", off)
	}
	for _, st := range []any{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.LeakyBucket{}, algorithm.FixedWindow{}} {
		typ := reflect.TypeOf(st)
		if typ.Size() > unsafe.Sizeof(e.small) {
			t.Errorf("%v is %d bytes, more than small", typ, typ.Size())
		}
		var check func(reflect.Type)
		check = func(typ reflect.Type) {
			for i := 0; i < typ.NumField(); i++ {
				switch f := typ.Field(i); f.Type.Kind() {
				case reflect.Int64:
				case reflect.Struct:
					check(f.Type)
				default:
					t.Errorf("%v.%s is a %v, not an int64", typ, f.Name, f.Type)
				}
			}
		}
		check(typ)
	}
	long := string(make([]byte, 49))
	if e := newEntry(sluice.AlgorithmGCRA, long, nil); e.key != long {
		t.Error("a key longer than the buffer was not kept whole")
	}
}

// TestIndexUnderChurn decides on one hot key from several goroutines while others flood the
// store with unique keys (tables grow, entries are evicted and swept under the lookups): the
// hot key admits exactly its limit, and the store never holds more than its maximum.
func TestIndexUnderChurn(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Unix(1_700_000_000, 0))
	s, err := New(WithClock(clock), WithMaxKeys(512), WithShards(2), WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hot := sluice.FixedWindow(1000, time.Hour)
	cold := sluice.FixedWindow(5, time.Millisecond)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func() { // hot key: 4 x 1000 requests for a limit of 1000
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				d, err := s.Take(ctx, sluice.Request{Key: "hot", Rule: hot, N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
		go func() { // churn: unique keys, evictions, rebuilds and sweeps
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				if _, err := s.Take(ctx, sluice.Request{Key: fmt.Sprintf("cold:%d:%d", g, i), Rule: cold, N: 1}); err != nil {
					t.Error(err)
					return
				}
				if i%500 == 0 {
					clock.Advance(time.Millisecond) // the cold keys so far expire
					s.Sweep()
				}
			}
		}()
	}
	wg.Wait()
	// Eviction takes the sampled entry closest to full, which is never the hot key (an hour
	// left, against a millisecond for any cold one): it keeps one entry throughout.
	if n := admitted.Load(); n != 1000 {
		t.Errorf("admitted %d on the hot key, want 1000", n)
	}
	if n := s.Len(); n > 512 {
		t.Errorf("%d keys held, max 512", n)
	}
	if s.Evictions() == 0 {
		t.Error("no live key was evicted: the churn did not fill the store")
	}
}

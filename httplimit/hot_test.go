package httplimit

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/sluicetest"
)

// A hot query parameter: every product has its own limit, the first cold_limit requests of a
// product are admitted without a store call and charged to the store when it turns hot, on
// every store.
func TestHotQueryParameter(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *sluice.Limiter, clock *sluicetest.ManualClock) {
		h := mustNew(t, l, WithClock(clock), WithLimits(Limit{Name: "product", Rule: sluice.PerMinute(4),
			Key: KeyQuery("product"), Hot: &hotkey.Config{TopK: 16, ColdLimit: 2}}))(okHandler)
		for i := range 40 { // many cold values: all admitted
			if c := get(h, "/items?product=p"+strconv.Itoa(i), nil).Code; c != http.StatusOK {
				t.Fatalf("cold product %d: %d", i, c)
			}
		}
		got := statuses(h, 6, "/items?product=flash", nil)
		want := codes(200, 200, 200, 200, 429, 429)
		if !slices.Equal(got, want) {
			t.Errorf("hot product: %v, want %v (the limit holds across cold and store admissions)", got, want)
		}
		clock.Advance(2 * time.Minute)
		if c := get(h, "/items?product=flash", nil).Code; c != http.StatusOK {
			t.Errorf("two periods later: %d", c)
		}
		if c := get(h, "/items", nil).Code; c != http.StatusOK {
			t.Errorf("no product: %d (not counted)", c)
		}
	})
}

func TestHotPolicyBadConfig(t *testing.T) {
	_, err := New(sluice.New(nil), WithLimits(Limit{Name: "p", Rule: sluice.PerMinute(4), Key: KeyQuery("q"), Hot: &hotkey.Config{ColdLimit: 5}}))
	if err == nil {
		t.Fatal("a cold_limit above the capacity was accepted")
	}
}

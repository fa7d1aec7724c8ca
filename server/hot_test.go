package server_test

import (
	"fmt"
	"strconv"
	"testing"
)

const hotRules = `
domain: shop
descriptors:
  - key: product
    hot: {top_k: 100, cold_limit: 2}
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: product
    value: flash-sale
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// A hot parameter admits the first cold_limit requests of a value without a store call,
// then charges them to the store, which holds the value to its limit; an exception value
// has its own limit.
func TestHotParameterColdValuesCostNoStoreCall(t *testing.T) {
	h := start(t, hotRules)
	for i := range 50 {
		if c := h.ask(t, "shop", desc("product", "p"+strconv.Itoa(i))).OverallCode; c != codeOK {
			t.Fatalf("cold value %d: %v", i, c)
		}
	}
	if n := h.store.Calls(); n != 0 {
		t.Fatalf("%d store calls for 50 cold values, want 0", n)
	}
	var codes []string
	for range 7 {
		codes = append(codes, h.ask(t, "shop", desc("product", "hot")).OverallCode.String())
	}
	want := "[OK OK OK OK OK OVER_LIMIT OVER_LIMIT]"
	if got := fmt.Sprint(codes); got != want {
		t.Errorf("hot value: %s, want %s", got, want)
	}
	// 2 cold, then a settle of 2 and a take each for the next 5 requests.
	if n := h.store.Calls(); n != 6 {
		t.Errorf("%d store calls for the hot value, want 6 (one charge, five decisions)", n)
	}
	if c := h.ask(t, "shop", desc("product", "flash-sale")).OverallCode; c != codeOK {
		t.Errorf("exception first request: %v", c)
	}
	if c := h.ask(t, "shop", desc("product", "flash-sale")).OverallCode; c != codeOver {
		t.Errorf("exception second request: %v, want its own limit of 1", c)
	}
}

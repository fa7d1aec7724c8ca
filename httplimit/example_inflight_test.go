package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

// A policy with InFlight holds a slot of its key while the handler runs: here at most one
// export per API key at once (and 60 a minute), and an adaptive limit on every LLM call.
func ExampleLimit_inFlight() {
	store, _ := memory.New()
	defer store.Close()
	limiter := sluice.New(store)
	grad, _ := adaptive.NewGradient(adaptive.Settings{Floor: 4, Ceiling: 64})
	mux := http.NewServeMux()
	limit := httplimit.Middleware(limiter, httplimit.WithServeMux(mux), httplimit.WithLimits(
		httplimit.Limit{Name: "exports", Rule: sluice.PerMinute(60), InFlight: &sluice.InFlight{Limit: 1},
			Key: httplimit.KeyHeader("X-API-Key"), Routes: []string{"POST /exports"}},
		httplimit.Limit{Name: "llm", InFlight: &sluice.InFlight{Lease: 30 * time.Second}, Adaptive: grad,
			Key: httplimit.KeyFunc(func(*http.Request) (string, bool) { return "all", true }), Routes: []string{"POST /llm"}},
	))
	h := limit(mux)
	export := func(key string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/exports", nil)
		r.Header.Set("X-API-Key", key)
		h.ServeHTTP(w, r)
		return w
	}
	nested := false
	mux.HandleFunc("POST /exports", func(w http.ResponseWriter, r *http.Request) {
		if nested || r.Header.Get("X-API-Key") != "k1" {
			return
		}
		nested = true
		// while k1's first export runs, a second of k1 is refused; k2's is served
		second := export("k1")
		fmt.Println("second export of k1 meanwhile:", second.Code, "Retry-After:", second.Header().Get("Retry-After"))
		fmt.Println("export of k2 meanwhile:", export("k2").Code)
	})
	fmt.Println("first export of k1:", export("k1").Code)
	fmt.Println("k1 again, after it:", export("k1").Code)
	// Output:
	// second export of k1 meanwhile: 429 Retry-After: 1
	// export of k2 meanwhile: 200
	// first export of k1: 200
	// k1 again, after it: 200
}

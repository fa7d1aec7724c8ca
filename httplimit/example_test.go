package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memory"
)

func Example() {
	store, _ := memory.New()
	defer store.Close()
	proxies, _ := clientip.New([]string{"10.0.0.0/8"}) // the load balancers
	limit := httplimit.Middleware(sluice.New(store),
		httplimit.WithResolver(proxies),
		httplimit.WithLimits(
			httplimit.Limit{Name: "per-ip", Rule: sluice.PerMinute(100)},
			httplimit.Limit{Name: "search", Rule: sluice.FixedWindow(2, time.Minute),
				Routes: []string{"GET /search"}, Key: httplimit.KeyIP()},
		))
	mux := http.NewServeMux()
	mux.Handle("GET /search", limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "results")
	})))

	for range 3 {
		r := httptest.NewRequest("GET", "/search", nil)
		r.RemoteAddr = "10.1.2.3:5555"                 // a trusted proxy...
		r.Header.Set("X-Forwarded-For", "203.0.113.7") // ...forwarding this client
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// 200 "per-ip";q=100;w=60, "search";q=2;w=60 1
	// 200 "per-ip";q=100;w=60, "search";q=2;w=60 0
	// 429 "per-ip";q=100;w=60, "search";q=2;w=60 0
}

package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing/fstest"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/proxy"
)

// A proxy allowing two requests a minute per client address in front of an upstream.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the upstream")
	}))
	defer upstream.Close()

	rules, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token_bucket}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
`)}}, "rules.yaml")
	if err != nil {
		panic(err)
	}
	p, err := proxy.New(proxy.Config{Upstream: upstream.URL, Addr: "127.0.0.1:0", AdminAddr: "-", Rules: rules})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Serve(ctx) }()

	for range 3 {
		resp, err := http.Get("http://" + p.Addr() + "/")
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	stop()
	<-done
	// Output:
	// 200 1
	// 200 0
	// 429 0
}

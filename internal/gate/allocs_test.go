package gate

import (
	"context"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rls"
)

// TestDecideAllocs: deciding a request that passes, on the memory store, allocates no more
// than sluice proxy's decision did before it moved here (the hot path of sluice proxy and of
// the doors): the Scratch is pooled and the Request lives in it; the 3 left are the client
// address's entry value and the two descriptors' store keys the engine builds.
func TestDecideAllocs(t *testing.T) {
	if race {
		t.Skip("the race detector allocates")
	}
	cfg, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(`
domain: d
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1000000000}
proxy:
  rate_limits:
    - actions: [{remote_address: {}}]
    - actions: [{path: {}}]
`)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := rls.New(rls.Config{Rules: cfg, ReloadInterval: -1, InFlight: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	resolver, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	g := New(eng, resolver, httplimit.HeadersBoth, nil, nil)
	defer g.Close()
	r := httptest.NewRequest("GET", "http://example.com/a/b", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Header.Set("X-Forwarded-For", "192.0.2.1")
	ctx := context.Background()
	decide := func() {
		sc := Get()
		sc.Request.Of(r)
		if o := g.Decide(ctx, sc, ""); o != Pass {
			t.Fatalf("outcome %d, err %v", o, sc.Err)
		}
		sc.Done()
		sc.Release()
	}
	decide() // plan, keys
	if n := testing.AllocsPerRun(200, decide); n > 3 {
		t.Errorf("%v allocations per decision, want at most 3", n)
	}
}

package gate

import (
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
)

// BenchmarkDescriptors builds the descriptors of a request under every kind of action
// (TestActions' rules): the part of sluice proxy's per-request cost that package replay
// shares with it (proxy.Descriptors, Descriptors here).
//
//	go test -run '^$' -bench Descriptors -count 5 ./internal/gate
func BenchmarkDescriptors(b *testing.B) {
	cfg, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(actionRules)}}, "rules.yaml")
	if err != nil {
		b.Fatal(err)
	}
	resolver, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		b.Fatal(err)
	}
	g := &Gate{resolver: resolver}
	r := httptest.NewRequest("POST", "http://example.com/api/v2/users?page=3", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.Header.Set("X-Api-Key", "k1")
	r.Header.Set("X-Tenant", "t1")
	d := cfg.Domain("d")
	b.ReportAllocs()
	for b.Loop() {
		sc := Get()
		sc.Request.Of(r)
		if !g.descriptors(sc, d) || len(sc.req.Descriptors) != 8 {
			b.Fatalf("%d descriptors", len(sc.req.Descriptors))
		}
		sc.Release()
	}
}

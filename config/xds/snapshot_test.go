package xds_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/sluicehq/sluice/config/xds"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/rls"
)

// tenants is a RateLimitConfig of n limits, one per tenant value, as a control plane with
// many clients sends it (Envoy Gateway names each value after its policy and route).
func tenants(n int) *rlsconf.RateLimitConfig {
	c := &rlsconf.RateLimitConfig{Name: "tenants", Domain: "tenants"}
	for i := range n {
		c.Descriptors = append(c.Descriptors, &rlsconf.RateLimitDescriptor{Key: "tenant", Value: fmt.Sprintf("default/httproute/api-%07d/rule/0", i),
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: 100}})
	}
	return c
}

// TestXDSEmptySnapshot: an empty snapshot that would remove every limit in force is NACKed,
// saying why, logged as an error, and the rules keep serving; with AllowEmpty it is applied
// (envoyproxy/ratelimit's behaviour). An empty first snapshot, with nothing to remove, is
// applied either way.
func TestXDSEmptySnapshot(t *testing.T) {
	for _, allow := range []bool{false, true} {
		srv := testenv.StartXDS(t, "127.0.0.1:0", "n", nil)
		var logs testenv.LogBuffer
		client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "n", AllowEmpty: allow})
		e := newEngine(t, rls.Config{RulesSource: client, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		runEngine(t, e)
		srv.Set(t, "1") // nothing in force yet: applied
		testenv.Eventually(t, 10*time.Second, "empty first snapshot applied", func() bool { return srv.Acked("1") })
		if !e.HasRules() || len(e.Rules().Domains()) != 0 {
			t.Fatalf("allow=%v: empty first snapshot: rules %v", allow, e.Rules().Domains())
		}
		srv.Set(t, "2", apiDomain)
		testenv.Eventually(t, 10*time.Second, "snapshot 2 ACKed", func() bool { return srv.Acked("2") })
		srv.Set(t, "3") // would remove every limit
		if !allow {
			testenv.Eventually(t, 10*time.Second, "empty snapshot NACKed", func() bool { return len(srv.Nacks()) > 0 })
			if nack := srv.Nacks()[0]; !strings.Contains(nack, "empty snapshot refused") || !strings.Contains(nack, "1 domains in force") {
				t.Errorf("NACK %q does not say why", nack)
			}
			if srv.Acked("3") {
				t.Error("the empty snapshot was ACKed")
			}
			if got := answer(e, "api", "user", "alice"); !strings.HasPrefix(got, "OK [api.user OK remaining=2") {
				t.Errorf("after the NACK: %s, want the rules in force", got)
			}
			var logged bool
			for _, r := range logs.Records(t, "rules reload rejected") {
				logged = logged || (r["level"] == "ERROR" && strings.Contains(fmt.Sprint(r["err"]), "empty snapshot refused"))
			}
			if !logged {
				t.Errorf("no error line for the refused snapshot:\n%s", logs.String())
			}
			continue
		}
		testenv.Eventually(t, 10*time.Second, "empty snapshot applied", func() bool { return srv.Acked("3") })
		if len(e.Rules().Domains()) != 0 || len(srv.Nacks()) != 0 {
			t.Errorf("AllowEmpty: rules %v, NACKs %v; want no rules, no NACK", e.Rules().Domains(), srv.Nacks())
		}
	}
}

// TestXDSSnapshotTooLarge: a snapshot above MaxMessageBytes is NACKed, naming its size and
// the bound, the rules in force keep serving and the stream stays open: the server
// (go-control-plane's cache, as Envoy Gateway's) sends the refused version again at once, and
// the client NACKs it again only after its backoff, not in a loop, until the next version,
// applied on the same stream; a snapshot above twice the bound, which gRPC refuses to
// receive, is logged as an error naming the bound.
func TestXDSSnapshotTooLarge(t *testing.T) {
	big := tenants(100)
	packed, err := anypb.New(big)
	if err != nil {
		t.Fatal(err)
	}
	size := proto.Size(packed)
	srv := testenv.StartXDS(t, "127.0.0.1:0", "n", nil)
	var logs testenv.LogBuffer
	const wait = 300 * time.Millisecond // between two NACKs of the refused version
	client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "n", MaxMessageBytes: size * 3 / 4, InitialBackoff: wait, MaxBackoff: wait, NoJitter: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	e := newEngine(t, rls.Config{RulesSource: client})
	runEngine(t, e)
	srv.Set(t, "1", apiDomain)
	testenv.Eventually(t, 10*time.Second, "snapshot 1 ACKed", func() bool { return srv.Acked("1") })
	srv.Set(t, "2", big)
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, "large snapshot NACKed", func() bool { return len(srv.Nacks()) > 0 })
	nack := srv.Nacks()[0]
	for _, w := range []string{"snapshot too large", fmt.Sprintf("%d bytes", size), fmt.Sprint(size * 3 / 4), "--xds-max-message-bytes"} {
		if !strings.Contains(nack, w) {
			t.Errorf("NACK %q does not say %q", nack, w)
		}
	}
	if got := answer(e, "api", "user", "alice"); !strings.HasPrefix(got, "OK [api.user OK remaining=2") {
		t.Errorf("after the NACK: %s, want the rules in force", got)
	}
	srv.Set(t, "3", llmDomain)
	testenv.Eventually(t, 10*time.Second, "snapshot 3 ACKed", func() bool { return srv.Acked("3") })
	elapsed := time.Since(start)
	if n, most, streams := len(srv.Nacks()), 2+int(elapsed/wait), srv.Streams(); n > most || streams != 1 {
		t.Errorf("%d NACKs in %v on %d streams, want at most %d (one per wait) on one stream", n, elapsed, streams, most)
	}

	srv.Set(t, "4", tenants(400)) // above twice the bound: gRPC refuses it
	testenv.Eventually(t, 10*time.Second, "error line", func() bool { return len(logs.Records(t, "xds: the xDS server sent a response too large")) > 0 })
	r := logs.Records(t, "xds: the xDS server sent a response too large")[0]
	if r["level"] != "ERROR" || r["max_message_bytes"] != float64(size*3/4) {
		t.Errorf("log line %v, want an error naming the bound", r)
	}
	if got := e.Rules().Domains(); len(got) != 1 || got[0] != "llm" {
		t.Errorf("rules %v after the refused response, want llm's still in force", got)
	}
}

// TestXDSLargeSnapshot: a snapshot of 100,000 limits (above gRPC's default 4 MiB) is
// received with the default bound, applied and ACKed on the first stream, and decides.
func TestXDSLargeSnapshot(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	big := tenants(n)
	packed, err := anypb.New(big)
	if err != nil {
		t.Fatal(err)
	}
	size := proto.Size(packed)
	srv := testenv.StartXDS(t, "127.0.0.1:0", "n", nil)
	client := newClient(t, xds.Options{Server: srv.Addr, NodeID: "n"})
	e := newEngine(t, rls.Config{RulesSource: client})
	runEngine(t, e)
	start := time.Now()
	srv.Set(t, "1", big)
	testenv.Eventually(t, 5*time.Minute, "large snapshot ACKed", func() bool { return srv.Acked("1") })
	t.Logf("%d limits, %d bytes: applied and ACKed in %v", n, size, time.Since(start))
	if !testing.Short() && size <= 4<<20 {
		t.Errorf("snapshot of %d bytes, want one above gRPC's default 4 MiB", size)
	}
	if got := len(e.Rules().Limits()); got != n || srv.Streams() != 1 || len(srv.Nacks()) != 0 {
		t.Fatalf("%d limits on %d streams, NACKs %v; want %d on one stream", got, srv.Streams(), srv.Nacks(), n)
	}
	last := fmt.Sprintf("default/httproute/api-%07d/rule/0", n-1)
	if got := answer(e, "tenants", "tenant", last); !strings.HasPrefix(got, "OK [tenants.tenant_"+last+" OK remaining=99") {
		t.Errorf("last tenant: %s", got)
	}
}

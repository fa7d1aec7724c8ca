package grpclimit_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestPeerIP: behind no trusted proxy, forwarding metadata a client sends is ignored, so it
// cannot pick a fresh key per call; behind a trusted proxy (the loopback peer here), the
// client the proxy names is the key, walked right to left past trusted hops only, with IPv6
// clients grouped by /64.
func TestPeerIP(t *testing.T) {
	type step struct {
		md          []string
		want        codes.Code
		wantSubject string // of the refusal
	}
	for _, tc := range []struct {
		name     string
		resolver *clientip.Resolver
		steps    []step
	}{
		{"no trusted proxy", nil, []step{
			{[]string{"x-forwarded-for", "203.0.113.1"}, codes.OK, ""},
			{[]string{"x-forwarded-for", "203.0.113.2"}, codes.ResourceExhausted, "per-ip:127.0.0.1"},
			{[]string{"forwarded", "for=203.0.113.3"}, codes.ResourceExhausted, "per-ip:127.0.0.1"},
		}},
		{"untrusting resolver", mustResolver(t, []string{"10.0.0.0/8"}), []step{
			{nil, codes.OK, ""},
			{[]string{"x-forwarded-for", "203.0.113.2"}, codes.ResourceExhausted, "per-ip:127.0.0.1"},
		}},
		{"trusted loopback proxy", mustResolver(t, []string{"127.0.0.0/8"}), []step{
			{[]string{"x-forwarded-for", "203.0.113.1"}, codes.OK, ""},
			{[]string{"x-forwarded-for", "203.0.113.2"}, codes.OK, ""},
			// The leftmost entry is the client's own claim; the proxy appended the real one.
			{[]string{"x-forwarded-for", "203.0.113.9, 203.0.113.1"}, codes.ResourceExhausted, "per-ip:203.0.113.1"},
			{[]string{"forwarded", `for="[2001:db8:1:2::1]:443"`}, codes.OK, ""},
			{[]string{"x-forwarded-for", "2001:db8:1:2::2"}, codes.ResourceExhausted, "per-ip:2001:db8:1:2::/64"},
			{[]string{"x-forwarded-for", "2001:db8:1:3::1"}, codes.OK, ""},
			{nil, codes.OK, ""}, // the proxy itself, 127.0.0.1
			{nil, codes.ResourceExhausted, "per-ip:127.0.0.1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newMemory(t, sluicetest.NewManualClock(t0))
			in := mustNew(t, l, every(grpclimit.Limit{Name: "per-ip", Rule: sluice.PerMinute(1), Key: grpclimit.KeyIP(tc.resolver, 64)}))
			s := serve(t, in, nil)
			for i, st := range tc.steps {
				r := s.check(t, "", st.md...)
				if r.code != st.want {
					t.Fatalf("step %d %v: %v %s, want %v", i, st.md, r.code, r.msg, st.want)
				}
				if st.wantSubject != "" && r.quota.GetViolations()[0].GetSubject() != hashedSubject(st.wantSubject) {
					t.Errorf("step %d %v: refused as %v, want %s", i, st.md, r.quota.GetViolations(), st.wantSubject)
				}
			}
		})
	}
}

func mustResolver(t *testing.T, trusted []string) *clientip.Resolver {
	t.Helper()
	r, err := clientip.New(trusted)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

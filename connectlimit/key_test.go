package connectlimit_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestKeyFuncs: each Key appends the key it reads of a call to what is already in dst, or
// reports none; Keys writes each part with its length.
func TestKeyFuncs(t *testing.T) {
	trusted, err := clientip.New([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Api-Key", "k|1")
	h.Set("X-Forwarded-For", "203.0.113.7, 10.1.1.1")
	call := connectlimit.Call{Spec: connect.Spec{Procedure: "/a.S/M"}, Peer: connect.Peer{Addr: "10.2.2.2:5000"}, Header: h}
	for _, tc := range []struct {
		name string
		key  connectlimit.Key
		call connectlimit.Call
		want string
		ok   bool
	}{
		{"procedure", connectlimit.KeyProcedure(), call, "p:/a.S/M", true},
		{"header", connectlimit.KeyHeader("x-api-key"), call, "p:k|1", true},
		{"header missing", connectlimit.KeyHeader("X-Tenant"), call, "p:", false},
		{"ip behind a trusted proxy", connectlimit.KeyIP(trusted, 64), call, "p:203.0.113.7", true},
		{"ip, proxy not trusted", connectlimit.KeyIP(nil, 64), call, "p:10.2.2.2", true},
		{"ipv6 by its /64", connectlimit.KeyIP(nil, 0), connectlimit.Call{Peer: connect.Peer{Addr: "[2001:db8:1:2:3:4:5:6]:443"}}, "p:2001:db8:1:2::/64", true},
		{"peer not an address", connectlimit.KeyIP(nil, 64), connectlimit.Call{Peer: connect.Peer{Addr: "@unix"}}, "p:", false},
		{"keys", connectlimit.Keys(connectlimit.KeyHeader("X-Api-Key"), connectlimit.KeyProcedure()), call, "p:3:k|1|6:/a.S/M", true},
		{"keys, a part missing", connectlimit.Keys(connectlimit.KeyProcedure(), connectlimit.KeyHeader("X-Tenant")), call, "p:", false},
	} {
		got, ok := tc.key(context.Background(), tc.call, []byte("p:"))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestKeyIPThroughProxy: a handler keys calls by client address; X-Forwarded-For counts only
// from a trusted proxy (here the loopback peer), so one client behind it cannot spend
// another's budget, and an untrusting resolver keys every call by the peer.
func TestKeyIPThroughProxy(t *testing.T) {
	loopback, err := clientip.New([]string{"127.0.0.1/32", "::1/128"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		resolver *clientip.Resolver
		want     string // of calls from A, A, B
	}{
		{"trusted", loopback, "[ok resource_exhausted ok]"},
		{"untrusted", nil, "[ok resource_exhausted resource_exhausted]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := mustNew(t, newMemory(t, sluicetest.NewManualClock(t0)), every(connectlimit.Limit{Name: "per-ip", Rule: sluice.FixedWindow(1, time.Hour), Key: connectlimit.KeyIP(tc.resolver, 64)}))
			s := serve(t, in, transports[0])
			var got []string
			for _, client := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.2"} {
				_, err := s.ping(t, nil, "X-Forwarded-For", client)
				if err == nil {
					got = append(got, "ok")
				} else {
					got = append(got, refusalOf(t, err).code.String())
				}
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
}

// TestCriticalitySheds: a limit with shares admits SHEDDABLE calls (X-Criticality) up to
// their share of the capacity, CRITICAL_PLUS ones to the end, as grpclimit's. The calls come in
// the window's last millisecond, where the fixed window's pace has let every class's whole
// share through.
func TestCriticalitySheds(t *testing.T) {
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 59, 999e6, time.UTC))
	in := mustNew(t, newMemory(t, clock), every(connectlimit.Limit{Name: "all", Rule: sluice.FixedWindow(10, time.Minute), Shares: &sluice.DefaultShares}))
	for _, tr := range transports[:2] {
		s := serve(t, in, tr)
		var got []string
		for _, class := range []string{"SHEDDABLE", "CRITICAL_PLUS"} {
			for range 6 {
				if _, err := s.ping(t, nil, "X-Criticality", class); err != nil {
					got = append(got, refusalOf(t, err).code.String())
				} else {
					got = append(got, "ok")
				}
			}
		}
		want := "[ok ok ok ok ok resource_exhausted ok ok ok ok ok resource_exhausted]"
		if fmt.Sprint(got) != want {
			t.Errorf("%s: got  %v\nwant %s", tr.name, got, want)
		}
		clock.Advance(time.Minute) // the next window, for the next transport
	}
}

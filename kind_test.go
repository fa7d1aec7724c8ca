package sluice_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestRequestKind checks the kind of each valid shape of request, and that the kinds that
// take units are the ones Takes names.
func TestRequestKind(t *testing.T) {
	rule := sluice.TokenBucket(10, time.Second, 0)
	for _, tc := range []struct {
		req  sluice.Request
		want sluice.RequestKind
	}{
		{sluice.Request{N: 1}, sluice.KindTake},
		{sluice.Request{N: 0}, sluice.KindPeek},
		{sluice.Request{N: 0, MaxDelay: time.Second}, sluice.KindPeek},
		{sluice.Request{N: -3}, sluice.KindRefund},
		{sluice.Request{N: -3, MaxDelay: time.Second}, sluice.KindRefund},
		{sluice.Request{N: 2, MaxDelay: time.Second}, sluice.KindWait},
		{sluice.Request{N: 2, Holdback: 4}, sluice.KindTakeHoldback},
		{sluice.Request{N: 2, Holdback: 4, Criticality: sluice.Sheddable}, sluice.KindTakeHoldback},
		{sluice.Request{N: 5, Settle: true}, sluice.KindSettle},
		{sluice.Request{N: 0, Settle: true}, sluice.KindSettle},
		{sluice.Request{N: -5, Settle: true}, sluice.KindSettle},
	} {
		req := tc.req
		req.Key, req.Rule = "k", rule
		if err := req.Validate(0); err != nil {
			t.Fatalf("%+v: %v", req, err)
		}
		if got := req.Kind(); got != tc.want {
			t.Errorf("%+v: Kind() = %s, want %s", req, got, tc.want)
		}
		if takes := tc.want == sluice.KindTake || tc.want == sluice.KindWait || tc.want == sluice.KindTakeHoldback; req.Kind().Takes() != takes {
			t.Errorf("%s.Takes() = %v", tc.want, !takes)
		}
	}
	if s := sluice.RequestKind(200).String(); s != "unknown" {
		t.Errorf("RequestKind(200) = %q", s)
	}
}

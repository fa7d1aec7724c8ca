package clientip

import (
	"net/netip"
	"testing"
)

func TestAppendKey(t *testing.T) {
	for _, tc := range []struct {
		addr string
		bits int
		want string
	}{
		{"203.0.113.9", 64, "203.0.113.9"},
		{"::ffff:203.0.113.9", 64, "203.0.113.9"},
		{"2001:db8:1:2:3:4:5:6", 0, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 56, "2001:db8:1::/56"},
		{"2001:db8:1:2:3:4:5:6", 127, "2001:db8:1:2:3:4:5:6/127"},
		{"2001:db8:1:2:3:4:5:6", 128, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", 200, "2001:db8:1:2:3:4:5:6"},
		{"2001:db8:1:2:3:4:5:6", -1, "2001:db8:1:2::/64"},
		{"fe80::1%eth0", 128, "fe80::1"},
		{"fe80::1%eth0", 64, "fe80::/64"},
	} {
		got := string(AppendKey([]byte("ip:"), netip.MustParseAddr(tc.addr), tc.bits))
		if got != "ip:"+tc.want {
			t.Errorf("AppendKey(%s, %d) = %q, want %q", tc.addr, tc.bits, got, "ip:"+tc.want)
		}
	}
	if got := string(AppendKey(nil, netip.Addr{}, 64)); got != "invalid" {
		t.Errorf("AppendKey(zero) = %q", got)
	}
}

func TestAppendKeyGroupsOneSubscriber(t *testing.T) {
	a := AppendKey(nil, netip.MustParseAddr("2001:db8:aa:bb::1"), 64)
	b := AppendKey(nil, netip.MustParseAddr("2001:db8:aa:bb:1234:5678:9abc:def0"), 64)
	c := AppendKey(nil, netip.MustParseAddr("2001:db8:aa:bc::1"), 64)
	if string(a) != string(b) || string(a) == string(c) {
		t.Fatalf("keys %q %q %q: want the first two equal and the third different", a, b, c)
	}
}

func TestAppendKeyDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	v6 := netip.MustParseAddr("2001:db8:1:2:3:4:5:6")
	v4 := netip.MustParseAddr("203.0.113.9")
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendKey(buf[:0], v6, 64)
		buf = AppendKey(buf[:0], v4, 64)
	})
	if allocs != 0 {
		t.Errorf("AppendKey allocates %v times per call", allocs)
	}
}

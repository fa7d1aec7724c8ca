package clientip

import (
	"net/netip"
	"strconv"
)

// DefaultIPv6PrefixBits is the prefix length AppendKey groups IPv6 clients by when asked for
// 0 bits: a /64, the block one subscriber usually holds.
const DefaultIPv6PrefixBits = 64

// AppendKey appends the rate-limit key text of a to dst and returns the extended slice. An
// IPv4 address is written in dotted form. An IPv6 address is masked to its first v6PrefixBits
// bits and written as "prefix/bits" ("2001:db8:1:2::/64"), or in full at 128 bits; v6PrefixBits
// <= 0 means DefaultIPv6PrefixBits and values above 128 mean 128. IPv4-mapped addresses count
// as IPv4 and zones are dropped. The zero Addr is written as "invalid". AppendKey does not
// allocate when dst has room.
func AppendKey(dst []byte, a netip.Addr, v6PrefixBits int) []byte {
	if !a.IsValid() {
		return append(dst, "invalid"...)
	}
	a = normalize(a)
	if a.Is4() {
		return a.AppendTo(dst)
	}
	bits := v6PrefixBits
	switch {
	case bits <= 0:
		bits = DefaultIPv6PrefixBits
	case bits >= 128:
		return a.AppendTo(dst)
	}
	p, _ := a.Prefix(bits) // cannot fail: a is a valid, zoneless IPv6 address and bits in 1..127
	dst = p.Addr().AppendTo(dst)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(bits), 10)
}

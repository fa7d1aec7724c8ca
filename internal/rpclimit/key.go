package rpclimit

import "strconv"

// Join appends the keys of parts parts in turn, separated by '|', each written with its
// length ("7:tenant1|12:/pkg.S/Write"), so that parts holding the separator cannot make two
// combinations share a key: the key of Keys(a, b) in grpclimit and connectlimit. part(i, dst)
// appends part i's key; a part the call lacks (ok false) leaves dst as it was given.
func Join(dst []byte, parts int, part func(i int, dst []byte) ([]byte, bool)) ([]byte, bool) {
	base := len(dst)
	for i := range parts {
		if i > 0 {
			dst = append(dst, '|')
		}
		start := len(dst)
		var ok bool
		if dst, ok = part(i, dst); !ok {
			return dst[:base], false
		}
		dst = prefixLength(dst, start)
	}
	return dst, true
}

// prefixLength inserts the length of dst[start:] and a colon before it.
func prefixLength(dst []byte, start int) []byte {
	var buf [21]byte
	prefix := append(strconv.AppendInt(buf[:0], int64(len(dst)-start), 10), ':')
	dst = append(dst, prefix...)
	copy(dst[start+len(prefix):], dst[start:len(dst)-len(prefix)])
	copy(dst[start:], prefix)
	return dst
}

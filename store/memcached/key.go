package memcached

import (
	"crypto/sha256"
	"encoding/base64"
	"net"
	"strconv"
	"strings"

	"github.com/bradfitz/gomemcache/memcache"
)

// Item keys. A user key's items share a base, prefix + body, and differ by a suffix after
// the last '|': "s" for the state of the CAS algorithms, "w<length ms>:<index>" for a window
// counter. The body is the user key itself when that is a legal memcached key that fits, and
// otherwise '#' and the unpadded base64url SHA-256 of the user key (43 bytes).
const (
	maxItemKey = 250 // memcached's limit
	maxSuffix  = 34  // "|w" + 11 digits (366 days in ms) + ":" + 20 digits
	hashedMark = '#'
)

// body returns the part of the item keys that names the user key: the key itself when it is
// safe to send raw (no byte <= ' ' or 0x7f, not starting with '#', and short enough that
// prefix + key + suffix fits 250 bytes), and otherwise '#' + base64url(SHA-256(key)). The
// mapping is injective but for SHA-256 collisions: a raw body never starts with '#'.
func body(prefix, key string) string {
	if len(prefix)+len(key)+maxSuffix <= maxItemKey && key[0] != hashedMark && legal(key) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return string(hashedMark) + base64.RawURLEncoding.EncodeToString(sum[:])
}

// legal reports whether s holds no byte memcached's text protocol refuses in a key.
func legal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// base names a user key's items: prefix + body, and a suffix.
type base struct{ prefix, body string }

// state is the item holding a CAS algorithm's encoded state.
func (b base) state() string { return b.prefix + b.body + "|s" }

// window is the item counting window idx of the given length (ms).
func (b base) window(lengthMS, idx int64) string {
	var k strings.Builder
	k.Grow(len(b.prefix) + len(b.body) + maxSuffix)
	k.WriteString(b.prefix)
	k.WriteString(b.body)
	k.WriteString("|w")
	var num [20]byte
	k.Write(strconv.AppendInt(num[:0], lengthMS, 10))
	k.WriteByte(':')
	k.Write(strconv.AppendInt(num[:0], idx, 10))
	return k.String()
}

// selector is the server selection of the clients NewFromServers builds: memcache.ServerList's
// (CRC-32 of the key modulo the number of servers), on the item key's base only, so every item
// of one user key lives on one server and a server that fails fails whole keys.
type selector struct{ list *memcache.ServerList }

func newSelector(list *memcache.ServerList, addrs []string) (*selector, error) {
	if list == nil {
		list = new(memcache.ServerList)
	}
	s := &selector{list: list}
	if err := s.list.SetServers(addrs...); err != nil {
		return nil, err
	}
	return s, nil
}

// PickServer implements memcache.ServerSelector.
func (s *selector) PickServer(key string) (net.Addr, error) {
	if i := strings.LastIndexByte(key, '|'); i >= 0 {
		key = key[:i]
	}
	return s.list.PickServer(key)
}

// Each implements memcache.ServerSelector.
func (s *selector) Each(f func(net.Addr) error) error { return s.list.Each(f) }

package rls

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Telemetry (the live view GET /v1/top, /ui and the sluice_top_key_rate gauges) never shows a
// request's descriptor value as sent unless the rules allow it (config.Limit.RawValues): API
// keys, tokens and addresses come in descriptor values, and a Prometheus label is stored for
// months. Other values are replaced by HashPrefix and a keyed hash, the same for one value
// within the process (so an operator can follow a key from page to page) and useless to
// guess values from outside it.

// HashPrefix starts a hashed value in telemetry.
const HashPrefix = "hash:"

// hashLen is the number of hexadecimal digits of a hashed value (48 bits).
const hashLen = 12

// telemetryKey keys the hashes; drawn once per process.
var telemetryKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}()

// hashValue returns HashPrefix and the keyed hash of v.
func hashValue(v string) string {
	m := hmac.New(sha256.New, telemetryKey)
	m.Write([]byte(v))
	var sum [sha256.Size]byte
	return HashPrefix + hex.EncodeToString(m.Sum(sum[:0]))[:hashLen]
}

// redactKey returns the store key of a descriptor ("domain|k1=v1|k2=v2", escaped as
// descriptorKey writes it) with the value of each entry i hashed unless raw[i]. An entry past
// raw, or the key of a limit the rules do not know, is hashed.
func redactKey(key string, raw []bool) string {
	var b strings.Builder
	b.Grow(len(key))
	entry := -1 // the domain
	for len(key) > 0 {
		seg, rest := cutUnescaped(key, '|')
		key = rest
		if entry >= 0 {
			b.WriteByte('|')
		}
		if k, v, ok := cutUnescapedOK(seg, '='); ok && entry >= 0 && (entry >= len(raw) || !raw[entry]) {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(hashValue(v))
		} else {
			b.WriteString(seg)
		}
		entry++
	}
	return b.String()
}

// cutUnescaped cuts s at its first sep not escaped by '\'.
func cutUnescaped(s string, sep byte) (before, after string) {
	before, after, _ = cutUnescapedOK(s, sep)
	return before, after
}

func cutUnescapedOK(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

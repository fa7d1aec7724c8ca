package rls

import (
	"strings"

	"github.com/sluicehq/sluice/internal/redact"
)

// Telemetry (the live view GET /v1/top, /ui and the sluice_top_key_rate gauges) never shows a
// request's descriptor value as sent unless the rules allow it (config.Limit.RawValues): API
// keys, tokens and addresses come in descriptor values, and a Prometheus label is stored for
// months. Other values are replaced by HashPrefix and a keyed hash, the same for one value
// within the process (so an operator can follow a key from page to page) and useless to
// guess values from outside it.

// HashPrefix starts a hashed value in telemetry.
const HashPrefix = redact.HashPrefix

// hashValue returns HashPrefix and the keyed hash of v (internal/redact: one hash for
// telemetry, traces, errors and answers).
func hashValue(v string) string { return redact.Hash(v) }

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

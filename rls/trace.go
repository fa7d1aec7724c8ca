package rls

import "strings"

// TraceKey returns a store key the engine decides on as a trace may show it: every
// descriptor value, and every segment that is not an entry (the key of the key form, as a
// request sent it), replaced by HashPrefix and the keyed hash telemetry uses; entry keys and
// the "#N" of a limit's later rules as they are; a per-instance key marked "local|". Rules'
// RawValues do not apply: traces leave the process for a collector.
func TraceKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 16)
	if rest, ok := strings.CutPrefix(key, localMark); ok {
		b.WriteString("local|")
		key = rest
	}
	for first := true; len(key) > 0; first = false {
		seg, rest := cutUnescaped(key, '|')
		key = rest
		if !first {
			b.WriteByte('|')
		}
		switch k, v, ok := cutUnescapedOK(seg, '='); {
		case ok:
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(hashValue(v))
		case !first && len(seg) > 1 && seg[0] == '#':
			b.WriteString(seg)
		default:
			b.WriteString(hashValue(seg))
		}
	}
	return b.String()
}

// TraceDescriptor returns the entries of a descriptor as a trace may show them:
// "k1=hash:...|k2=hash:...", every value hashed as TraceKey does.
func TraceDescriptor(entries []Entry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(e.Key)
		b.WriteByte('=')
		b.WriteString(hashValue(e.Value))
	}
	return b.String()
}

package redis

import "strings"

// redisKey returns the Redis key of a user key: prefix + "{" + escaped key + "}". Escaping
// ('\' as "\\", '{' as "\[", '}' as "\]") keeps the whole user key inside the hash tag, so it
// alone chooses the Cluster slot, and is injective, so two user keys never share a Redis key.
func redisKey(prefix, key string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(key) + 2)
	b.WriteString(prefix)
	b.WriteByte('{')
	if strings.ContainsAny(key, `\{}`) {
		for i := 0; i < len(key); i++ {
			switch c := key[i]; c {
			case '\\':
				b.WriteString(`\\`)
			case '{':
				b.WriteString(`\[`)
			case '}':
				b.WriteString(`\]`)
			default:
				b.WriteByte(c)
			}
		}
	} else {
		b.WriteString(key)
	}
	b.WriteByte('}')
	return b.String()
}

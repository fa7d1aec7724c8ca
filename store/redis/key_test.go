package redis

import (
	"strings"
	"testing"
)

func TestRedisKeyHashTag(t *testing.T) {
	seen := map[string]string{}
	for _, k := range []string{"a", "{a}", "{a}b", "a}{", "}", "{", `\`, `\[`, `\]`, "[", "]", `{\}`, `\{\}`} {
		rk := redisKey("p:", k)
		// The hash tag is what lies between the first '{' and the next '}': it must be the
		// whole escaped key, which holds no brace.
		open := strings.IndexByte(rk, '{')
		end := strings.IndexByte(rk[open+1:], '}') + open + 1
		if open != 2 || end != len(rk)-1 {
			t.Errorf("key %q -> %q: hash tag is %q, not the whole key", k, rk, rk[open+1:end])
		}
		if other, dup := seen[rk]; dup {
			t.Errorf("keys %q and %q share the Redis key %q", k, other, rk)
		}
		seen[rk] = k
	}
}

func FuzzRedisKey(f *testing.F) {
	f.Add("a", "b")
	f.Add("{", `\[`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if a != b && redisKey("p:", a) == redisKey("p:", b) {
			t.Fatalf("%q and %q share a Redis key", a, b)
		}
		rk := redisKey("p:", a)
		if strings.Count(rk, "{") != 1 || strings.Count(rk, "}") != 1 || !strings.HasSuffix(rk, "}") {
			t.Fatalf("%q -> %q: braces leak out of the escape", a, rk)
		}
	})
}

package store_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/store"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"memory":                   "memory",
		"redis://127.0.0.1:6379/0": "redis://127.0.0.1:6379/0",
		"redis://:s3cret@redis:6379?pool_size=20":         "redis://:xxxxx@redis:6379?pool_size=20",
		"rediss://app:s3cret@redis:6380/2":                "rediss://app:xxxxx@redis:6380/2",
		"redis://user@redis:6379":                         "redis://user@redis:6379",
		"redis-cluster://u:p@a:1,b:2":                     "redis-cluster://u:xxxxx@a:1,b:2",
		"redis-sentinel://a:1,b:2/m?password=s3cret&db=1": "redis-sentinel://a:1,b:2/m?password=xxxxx&db=1",
		"redis-sentinel://x:p@w@a:1/m?Password=s#f":       "redis-sentinel://x:xxxxx@a:1/m?Password=xxxxx#f",
		"memcached://10.0.0.1:11211,10.0.0.2:11211":       "memcached://10.0.0.1:11211,10.0.0.2:11211",
	} {
		if got := store.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzRedact: whatever the URL, a password set in it does not survive.
func FuzzRedact(f *testing.F) {
	f.Add("s3cret", "redis://:%s@h:1/0?password=%s")
	f.Add("pw", "redis-sentinel://u:%s@a:1,b:2/m?db=1&password=%s#x")
	f.Fuzz(func(t *testing.T, secret, shape string) {
		if len(secret) < 6 || strings.ContainsAny(secret, ":@/?#&=%") || strings.Count(shape, "%s") != 2 ||
			!strings.HasPrefix(shape, "redis") || strings.Contains(shape, "%!") {
			return
		}
		u := strings.Replace(strings.Replace(shape, "%s", secret, 1), "%s", secret, 1)
		if strings.Count(u, secret) != 2 {
			return // the secret is also part of a host or a name: not what is tested
		}
		if !strings.Contains(shape, ":%s@") || !strings.Contains(shape, "password=%s") {
			return
		}
		i := strings.Index(shape, "://")
		if i < 0 {
			return
		}
		end := len(shape)
		if k := strings.IndexAny(shape[i+3:], "/?#"); k >= 0 {
			end = i + 3 + k
		}
		if j := strings.Index(shape, ":%s@"); j < i+3 || j > end {
			return // the userinfo must be in the authority
		}
		if got := store.Redact(u); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q keeps the password", u, got)
		}
	})
}

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
		"redis://token@redis:6379":                        "redis://xxxxx@redis:6379",
		"redis-cluster://u:p@a:1,b:2":                     "redis-cluster://u:xxxxx@a:1,b:2",
		"redis-sentinel://a:1,b:2/m?password=s3cret&db=1": "redis-sentinel://a:1,b:2/m?xxxxx&db=1",
		"redis-sentinel://x:p@w@a:1/m?Password=s#f":       "redis-sentinel://x:xxxxx@a:1/m?xxxxx#xxxxx",
		"memcached://10.0.0.1:11211,10.0.0.2:11211":       "memcached://10.0.0.1:11211,10.0.0.2:11211",
		"http://[::1]:8080/api/v1":                        "http://[::1]:8080/api/v1",
		// Issue 31, item 3: a raw '#', '/', '?' or space in the password, or a URL that does
		// not parse, printed the password.
		"redis://:pa#ss@redis:6379":                 "redis://xxxxx",
		"redis://:pa/ss@redis:6379/0":               "redis://xxxxx",
		"redis://:pa?ss@redis:6379":                 "redis://xxxxx",
		"redis://:pa ss@redis:6379":                 "redis://:xxxxx@redis:6379",
		"redis://h:1/?password=p@ss":                "redis://xxxxx",
		"redis://u:pa/ss:6379":                      "redis://xxxxx", // no '@': not a host list
		"redis:/:s3cret@redis:6379":                 "xxxxx",
		"redis://redis:6379/?pw=s3cret":             "redis://redis:6379/?xxxxx",
		"redis://redis:6379/0?db=s3cr#et":           "redis://redis:6379/0?db=s3cr#xxxxx",
		"re dis://x":                                "xxxxx",
		"s3cret":                                    "xxxxx",
		"a:1,b:2":                                   "a:1,b:2",
		"eu=redis://:pw@h:1,us=rediss://u:pw@g:2/0": "eu=redis://:xxxxx@h:1,us=rediss://u:xxxxx@g:2/0", // --regions
		"e u=redis://:pw@h:1":                       "xxxxx",
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

// FuzzRedactPassword (issue 31, item 3): a password of any bytes — raw '#', '/', '?', '@',
// spaces, percent signs, nothing escaped — in the userinfo of a store URL of any scheme,
// hosts, path and query never appears in what Redact returns; nor does the value of a query
// parameter that is not one of the harmless ones.
func FuzzRedactPassword(f *testing.F) {
	f.Add("redis", "user", "pa#ss/wo?rd", "h:1,g:2", "/0", "pool_size=3", "token", "t0ps3cret")
	f.Add("rediss", "", "a b@c", "[::1]:6379", "", "", "password", "another")
	f.Add("http", "u", "sk-live-123456", "upstream:8080", "/api", "x=1", "key", "sk-live-abcdef")
	f.Fuzz(func(t *testing.T, scheme, user, password, hosts, path, query, param, value string) {
		for _, secret := range []string{password, value} {
			if len(secret) < 6 || strings.Trim(secret, "x&:@/?#=") == "" {
				return // too short to tell, or spelt like the masks and their separators
			}
		}
		param = "q" + param // no harmless parameter's name (db, pool_size, ...) starts with q
		u := scheme + "://" + user + ":" + password + "@" + hosts + path + "?" + query + "&" + param + "=" + value
		if strings.Count(u, password) != 1 || strings.Count(u, value) != 1 {
			return // the secret is also some other part: not what is tested
		}
		got := store.Redact(u)
		if strings.Contains(got, password) {
			t.Errorf("Redact(%q) = %q keeps the password", u, got)
		}
		if strings.Contains(got, value) {
			t.Errorf("Redact(%q) = %q keeps the value of %q", u, got, param)
		}
	})
}

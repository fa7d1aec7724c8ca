package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// ScriptCalls reads how many script calls (EVALSHA and EVAL) the Redis server at addr has
// executed (INFO commandstats), for tests that count a store's calls on a server of their own.
func ScriptCalls(t testing.TB, addr string) int64 {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
				n, _ := strconv.ParseInt(calls, 10, 64)
				total += n
			}
		}
	}
	return total
}

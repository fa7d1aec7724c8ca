package redis_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/redis"
)

// TestBatchReadsStatesOnce: a batched script call reads its keys' states with one MGET, not
// with a GET per key, and a key given twice reads its state again with GET after its first
// decision (which the batch differential holds exact). Counted on the server's MONITOR stream,
// for this test's keys only.
func TestBatchReadsStatesOnce(t *testing.T) {
	c, ok := standalone(t).(*goredis.Client)
	if !ok {
		t.Skip("MONITOR needs a standalone client")
	}
	s := newStore(t, c)
	ctx := context.Background()
	userKeys := []string{"a", "b", "c", "d", "e", "f", "a", "b"} // a and b twice
	marker := s.Key("monitor-marker")
	// MONITOR on a connection of its own, read line by line (RESP simple strings).
	conn, err := net.DialTimeout("tcp", c.Options().Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 4096)
	go func() {
		r := bufio.NewReader(conn)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	// MONITOR starts asynchronously: wait until it shows a command of ours.
	seen := func(want string) []string {
		var got []string
		deadline := time.After(10 * time.Second)
		for {
			if err := c.Exists(ctx, marker).Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("MONITOR connection closed")
				}
				got = append(got, l)
				if strings.Contains(l, want) {
					return got
				}
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("MONITOR never showed %s", want)
			}
		}
	}
	seen(`"exists" "` + marker + `"`)
	rule := sluice.Rule{Algorithm: sluice.AlgorithmGCRA, Limit: 10, Period: time.Second}
	_, errs := redis.TakeBatch(ctx, s, len(userKeys), func(i int) sluice.Request {
		return sluice.Request{Key: userKeys[i], Rule: rule, N: 1}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := redis.BatchedDecisions(s); n != int64(len(userKeys)) {
		t.Fatalf("%d decisions batched, want %d (one batched call)", n, len(userKeys))
	}
	end := s.Key("monitor-end")
	c.Exists(ctx, end)
	var gets, mgets int
	for _, l := range seen(`"exists" "` + end + `"`) {
		switch {
		case strings.Contains(l, `"MGET" "`+s.Key("a")+`"`) || strings.Contains(l, `"mget" "`+s.Key("a")+`"`):
			mgets++
		case strings.Contains(strings.ToLower(l), `"get" "`+strings.ToLower(s.Key("a"))+`"`),
			strings.Contains(strings.ToLower(l), `"get" "`+strings.ToLower(s.Key("b"))+`"`),
			strings.Contains(strings.ToLower(l), `"get" "`+strings.ToLower(s.Key("c"))+`"`):
			gets++
		}
	}
	if mgets != 1 || gets != 2 {
		t.Errorf("the batched call read with %d MGET and %d GET of its keys a, b, c, want 1 MGET and 2 GET (a and b again)", mgets, gets)
	}
}

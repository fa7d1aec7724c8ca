package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestSentinelFailoverUnderLoad (issue 16, item 4): a server on the shared Sentinel setup
// (redis-sentinel:// URL) decides under load from 4 HTTP clients while SENTINEL FAILOVER
// moves the primary. Every answer is a decision or a 503 (no silent allow), decisions resume
// within 2 s of the new primary being announced, and the over-admission from asynchronous
// replication (admissions the new primary does not hold) is measured.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	testenv.Timing(t)
	addrs, master := testenv.SentinelFailover(t)
	cfg := redisConfig(t, "redis-sentinel://"+strings.Join(addrs, ",")+"/"+master)
	cfg.StoreConfig.Timeout = 200 * time.Millisecond
	h := (&harness{}).run(t, cfg)
	base := "http://" + h.srv.HTTPAddr()
	key := "failover:" + randomSuffix()
	body := `{"key":"` + key + `","rule":{"limit":1000000,"period":"1h"}}`
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: addrs[0]})
	defer sc.Close()
	ctx := context.Background()
	before, err := sc.GetMasterAddrByName(ctx, master).Result()
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		at   time.Time
		code int
	}
	var mu sync.Mutex
	var answers []answer
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code := 0
				if resp, err := client.Post(base+"/v1/allow", "application/json", strings.NewReader(body)); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				answers = append(answers, answer{time.Now(), code})
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	deadline := time.Now().Add(60 * time.Second)
	for sc.Failover(ctx, master).Err() != nil { // retried while Sentinel settles a previous one
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatal("SENTINEL FAILOVER refused for 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	failedOver := time.Now()
	var announced time.Time
	for time.Now().Before(deadline) {
		after, err := sc.GetMasterAddrByName(ctx, master).Result()
		if err == nil && net.JoinHostPort(after[0], after[1]) != net.JoinHostPort(before[0], before[1]) {
			announced = time.Now()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	if announced.IsZero() {
		t.Fatal("no new primary announced within 60 s")
	}

	var admitted, unavailable, other int
	var lastOK, firstOKAfter time.Time
	var longestGap time.Duration
	for _, a := range answers {
		switch a.code {
		case http.StatusOK:
			admitted++
			if !lastOK.IsZero() {
				longestGap = max(longestGap, a.at.Sub(lastOK))
			}
			lastOK = a.at
			if firstOKAfter.IsZero() && a.at.After(announced) {
				firstOKAfter = a.at
			}
		case http.StatusServiceUnavailable:
			unavailable++
		default:
			other++
		}
	}
	// What the new primary holds for the key (a peek through the same server).
	resp, err := http.Post(base+"/v1/allow", "application/json", strings.NewReader(`{"key":"`+key+`","rule":{"limit":1000000,"period":"1h"},"n":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var peek struct {
		Remaining int64 `json:"remaining"`
	}
	json.NewDecoder(resp.Body).Decode(&peek)
	resp.Body.Close()
	held := 1_000_000 - peek.Remaining
	t.Logf("failover %v -> new primary announced after %v; %d admitted, %d UNAVAILABLE, %d other; longest gap between decisions %v; first decision %v after the announcement; the new primary holds %d (%d admissions lost to replication lag)",
		before, announced.Sub(failedOver).Round(time.Millisecond), admitted, unavailable, other, longestGap.Round(time.Millisecond),
		firstOKAfter.Sub(announced).Round(time.Millisecond), held, int64(admitted)-held)
	if other != 0 {
		t.Errorf("%d answers neither a decision nor UNAVAILABLE", other)
	}
	if firstOKAfter.IsZero() || firstOKAfter.Sub(announced) > 2*time.Second {
		t.Errorf("decisions did not resume within 2 s of the new primary's announcement")
	}
	if held > int64(admitted) {
		t.Errorf("the new primary holds %d, more than the %d admitted", held, admitted)
	}
}

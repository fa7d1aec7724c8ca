package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// workload says what the callers ask for.
type workload struct {
	domain  string
	callers int
	// users > 0: caller c's i-th request names user (i*callers+c) mod users under the key
	// "user", so consecutive requests spread over every user and each user is asked about
	// equally often. users == 0: every request names the one key hot=hot.
	users int
}

// descriptorGen gives the descriptor entry of a caller's i-th request. It shares nothing
// writable between callers.
type descriptorGen struct {
	callers int
	values  []string // user names; empty: the hot key
}

func newDescriptorGen(w workload) descriptorGen {
	g := descriptorGen{callers: w.callers}
	for u := range w.users {
		g.values = append(g.values, "u"+strconv.Itoa(u))
	}
	return g
}

// entry is the descriptor entry of caller c's i-th request.
func (g descriptorGen) entry(c, i int) (key, value string) {
	if len(g.values) == 0 {
		return "hot", "hot"
	}
	return "user", g.values[(i*g.callers+c)%len(g.values)]
}

// loadResult is what one closed-loop run measured.
type loadResult struct {
	requests, errors, overLimit int64
	elapsed                     time.Duration
	p50, p99                    time.Duration
	firstErr                    error
}

// callers is a set of closed-loop RLS callers, one gRPC connection each.
type callers struct {
	w       workload
	gen     descriptorGen
	clients []rlsv3.RateLimitServiceClient
	conns   []*grpc.ClientConn
}

func dialCallers(addr string, w workload) (*callers, error) {
	cs := &callers{w: w, gen: newDescriptorGen(w)}
	for range w.callers {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			cs.close()
			return nil, fmt.Errorf("rlsload: dial %s: %w", addr, err)
		}
		cs.conns = append(cs.conns, conn)
		cs.clients = append(cs.clients, rlsv3.NewRateLimitServiceClient(conn))
	}
	return cs, nil
}

func (cs *callers) close() {
	for _, c := range cs.conns {
		c.Close()
	}
}

// call sends caller c's i-th request.
func (cs *callers) call(ctx context.Context, c, i int) (*rlsv3.RateLimitResponse, error) {
	k, v := cs.gen.entry(c, i)
	req := &rlsv3.RateLimitRequest{Domain: cs.w.domain, Descriptors: []*rlcommon.RateLimitDescriptor{{
		Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: k, Value: v}},
	}}}
	return cs.clients[c].ShouldRateLimit(ctx, req)
}

// waitReady calls until one call succeeds or `within` has passed: a server just started may
// not listen yet, and a peer may still be connecting to its store.
func (cs *callers) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cs.call(ctx, 0, 0)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rlsload: no successful call within %v: %w", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run drives every caller in a closed loop (the next call as soon as the previous answer
// arrives) for d. Each call is bounded by callTimeout; a call's error is counted, not fatal.
func (cs *callers) run(d, callTimeout time.Duration) loadResult {
	var mu sync.Mutex
	var all []time.Duration
	var res loadResult
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	begin := time.Now()
	for c := range cs.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			var errs, over int64
			var first error
			for i := 0; ; i++ {
				s := time.Now()
				if !s.Before(stop) {
					break
				}
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				resp, err := cs.call(ctx, c, i)
				cancel()
				lat = append(lat, time.Since(s))
				switch {
				case err != nil:
					errs++
					if first == nil {
						first = err
					}
				case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
					over++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			res.requests += int64(len(lat))
			res.errors += errs
			res.overLimit += over
			if res.firstErr == nil {
				res.firstErr = first
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(begin)
	res.p50, res.p99 = quantile(all, .5), quantile(all, .99)
	return res
}

// quantile is the q-quantile of ds (sorted in place), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	if !slices.IsSorted(ds) {
		slices.Sort(ds)
	}
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

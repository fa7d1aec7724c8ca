package grpclimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestKeysOfConcurrentCalls: on the memory store the pipeline lends each call's keys from its
// pooled buffer instead of allocating them; concurrent calls with 40 API keys, 3 calls each
// against a limit of 2, each get their own key's budget (two admitted, one refused) and a
// refusal names their own key (hashed), never another call's.
func TestKeysOfConcurrentCalls(t *testing.T) {
	l := newMemory(t, sluicetest.NewManualClock(t0))
	in := mustNew(t, l, every(grpclimit.Limit{Name: "per-key", Rule: sluice.FixedWindow(2, time.Hour), Key: grpclimit.KeyMetadata("x-api-key")}))
	s := serve(t, in, nil)
	var wg sync.WaitGroup
	for k := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("tenant-%02d", k)
			var codesSeen []codes.Code
			for range 3 {
				r := s.check(t, "", "x-api-key", key)
				codesSeen = append(codesSeen, r.code)
				if r.code == codes.ResourceExhausted && (r.quota == nil || r.quota.Violations[0].Subject != hashedSubject("per-key:"+key)) {
					t.Errorf("%s: refusal %+v names another key", key, r.quota)
				}
			}
			ok := 0
			for _, c := range codesSeen {
				if c == codes.OK || c == codes.NotFound {
					ok++
				}
			}
			if ok != 2 {
				t.Errorf("%s: %v, want two admitted and one refused", key, codesSeen)
			}
		}()
	}
	wg.Wait()
}

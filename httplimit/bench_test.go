package httplimit

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func BenchmarkSetHeaders(b *testing.B) {
	results := []Result{{Name: "ip", Rule: sluice.PerMinute(1e9), Decision: sluice.Decision{Allowed: true, Limit: 1e9, Remaining: 999_999_123, ResetAfter: 60 * time.Second}}}
	policy := policyValue(results)
	for _, style := range []HeaderStyle{HeadersBoth, HeadersIETF, HeadersX, HeadersNone} {
		b.Run(style.String(), func(b *testing.B) {
			h := http.Header{}
			b.ReportAllocs()
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(0, &ru0)
			for b.Loop() {
				clear(h)
				setHeaders(h, style, results, policy, t0.UnixNano())
			}
			_ = syscall.Getrusage(0, &ru1)
			b.ReportMetric(float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/float64(b.N), "cpu-ns/op")
		})
	}
}

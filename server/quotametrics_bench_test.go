package server

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/quota/rlqs"
)

// BenchmarkQuotaObserver is what the RLQS metrics add to the answer of one report message:
// the Observer calls of a message (Reported, then Sent for its assignments), through the
// server's Prometheus observer against one that counts nothing.
func BenchmarkQuotaObserver(b *testing.B) {
	m, err := newQuotaMetrics(prometheus.NewRegistry(), &Server{})
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range []struct {
		name string
		obs  rlqs.Observer
	}{{"none", nopQuotaObserver{}}, {"prometheus", m}} {
		b.Run(o.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				o.obs.Reported("bench", 100, 300*time.Microsecond)
				o.obs.Sent(rlqs.ActionAssignment, 100)
			}
		})
	}
}

type nopQuotaObserver struct{}

func (nopQuotaObserver) Reported(string, int, time.Duration) {}
func (nopQuotaObserver) Rejected(rlqs.Reason)                {}
func (nopQuotaObserver) Sent(rlqs.ActionKind, int)           {}
func (nopQuotaObserver) StateError()                         {}
func (nopQuotaObserver) StateRetry()                         {}
func (nopQuotaObserver) Uncovered(string)                    {}

package replay

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkReplay replays a generated combined log (50 clients, 1,000 requests a second):
// the cost of a line, read, parsed, decided and counted.
func BenchmarkReplay(b *testing.B) {
	format, _ := ParseFormat("combined", "")
	rules := loadRules(b, sluice.AlgorithmSlidingWindow)
	in := Input{Name: "generated", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(&generated{n: b.N, every: time.Millisecond}), nil
	}}
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := Run(context.Background(), Config{Rules: rules, Format: format}, in); err != nil {
		b.Fatal(err)
	}
}

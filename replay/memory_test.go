package replay

import (
	"context"
	"io"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
)

// generated is a combined-format log written as it is read: n requests, one every `every`,
// each from a client of its own when distinct (else from one of 50).
type generated struct {
	n, i     int
	every    time.Duration
	distinct bool
	buf      []byte
	stamp    string // the time of the current second, formatted
	stampAt  time.Time
}

func (g *generated) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		c := g.i
		if !g.distinct {
			c %= 50
		}
		if at := testStart.Add(time.Duration(g.i) * g.every).Truncate(time.Second); !at.Equal(g.stampAt) {
			g.stamp, g.stampAt = at.Format(clfLayout), at
		}
		g.buf = append(g.buf, "10."...)
		g.buf = strconv.AppendInt(g.buf, int64(c>>16&255), 10)
		g.buf = append(g.buf, '.')
		g.buf = strconv.AppendInt(g.buf, int64(c>>8&255), 10)
		g.buf = append(g.buf, '.')
		g.buf = strconv.AppendInt(g.buf, int64(c&255), 10)
		g.buf = append(g.buf, " - - ["...)
		g.buf = append(g.buf, g.stamp...)
		g.buf = append(g.buf, "] \"GET /api/items HTTP/1.1\" 200 12 \"-\" \"test\"\n"...)
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[:copy(g.buf, g.buf[n:])]
	return n, nil
}

// TestReplayMemoryIsBounded: memory stays flat whatever the number of distinct clients: with
// a new client on every line, the heap after 3 x as many lines has grown by less than a
// tenth of what keeping every client would take (idle clients' windows freed, summaries
// capped by MaxClients, the store swept in virtual time).
func TestReplayMemoryIsBounded(t *testing.T) {
	n := 192 << 10
	if testing.Short() || raceEnabled {
		n = 96 << 10
	}
	format, _ := ParseFormat("combined", "")
	var heaps []uint64
	progress := func(read, total, lines int64) {
		if lines%(32<<10) == 0 && lines > 0 {
			heaps = append(heaps, testenv.LiveHeap())
		}
	}
	in := Input{Name: "generated", Open: func() (io.ReadCloser, error) {
		return io.NopCloser(&generated{n: n, every: 10 * time.Millisecond, distinct: true}), nil
	}}
	rep, err := Run(context.Background(), Config{Rules: loadRules(t, sluice.AlgorithmSlidingLog), Format: format,
		MaxClients: 10000, Progress: progress}, in)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(rep)
	r := rep.Rules[0]
	if r.Clients != int64(n) || r.DroppedClients != int64(n-10000) || r.DroppedActive != 0 || rep.Requests != int64(n) {
		t.Fatalf("clients %d (dropped %d, %d active), requests %d, want %d", r.Clients, r.DroppedClients, r.DroppedActive, rep.Requests, n)
	}
	// The first sample is taken once the store holds its steady minute of clients (6,000).
	first, last := heaps[0], heaps[len(heaps)-1]
	grown := int64(last) - int64(first)
	perClient := int64(250) // what a kept client would cost: its summary and key
	limit := perClient * int64(n-(32<<10)) / 10
	t.Logf("heap %.1f MiB after %d lines, %.1f MiB after %d: %+d KiB (keeping every client: ~%d KiB)",
		testenv.MiB(first), 32<<10, testenv.MiB(last), n, grown>>10, perClient*int64(n-(32<<10))>>10)
	if grown > limit {
		t.Errorf("the heap grew by %d KiB over %d new clients, more than %d KiB", grown>>10, n-(32<<10), limit>>10)
	}
}

// Command loggen writes a synthetic access log in nginx's combined format, for the replay
// benchmark (docs/BENCHMARKS.md): -lines requests at -rate a second from -clients addresses,
// the busiest first (client k is drawn with weight 1/(k+1), a Zipf law: a few clients make
// most requests, as in real traffic), 5% of them to /login. Deterministic for a -seed.
//
//	go run ./replay/internal/loggen -lines 10000000 | gzip -1 > /tmp/10m.log.gz
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

func main() {
	lines := flag.Int("lines", 1_000_000, "requests to write")
	clients := flag.Int("clients", 100_000, "distinct client addresses")
	rate := flag.Float64("rate", 2000, "requests a second, on average")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *lines < 0 || *clients < 1 || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "loggen: -lines >= 0, -clients >= 1, -rate > 0")
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(*seed, *seed))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(*clients-1))
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	at := time.Date(2024, 5, 14, 0, 0, 0, 0, time.UTC)
	stamp, stampAt := "", time.Time{}
	var b []byte
	for range *lines {
		at = at.Add(time.Duration(rng.ExpFloat64() / *rate * 1e9))
		if s := at.Truncate(time.Second); !s.Equal(stampAt) {
			stamp, stampAt = s.Format("02/Jan/2006:15:04:05 -0700"), s
		}
		c := zipf.Uint64()
		b = b[:0]
		b = append(b, "10."...)
		b = strconv.AppendUint(b, c>>16&255, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, c>>8&255, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, c&255, 10)
		b = append(b, " - - ["...)
		b = append(b, stamp...)
		if rng.IntN(20) == 0 {
			b = append(b, `] "POST /login HTTP/1.1" 200 `...)
		} else {
			b = append(b, `] "GET /api/products/`...)
			b = strconv.AppendInt(b, int64(rng.IntN(1000)), 10)
			b = append(b, ` HTTP/1.1" 200 `...)
		}
		b = strconv.AppendInt(b, int64(200+rng.IntN(4000)), 10)
		b = append(b, " \"-\" \"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0\"\n"...)
		w.Write(b)
	}
}

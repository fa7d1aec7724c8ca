//go:build ignore

// Command gen writes access.log.gz, the README's example of sluice replay, compare and
// suggest: 10 minutes of a shop's traffic in nginx's combined format, gzipped, from
// documentation addresses (RFC 5737). Run it from this directory: go run gen.go
package main

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"time"
)

type request struct {
	at     time.Time
	client string
	method string
	path   string
	ua     string
}

func main() {
	rng := rand.New(rand.NewPCG(36, 36))
	start := time.Date(2024, 5, 14, 12, 0, 0, 0, time.FixedZone("", 2*3600))
	end := start.Add(10 * time.Minute)
	var reqs []request
	every := func(client, ua string, from, to time.Time, gap func() time.Duration, path func() (string, string)) {
		for t := from.Add(gap() / 2); t.Before(to); t = t.Add(gap()) {
			m, p := path()
			reqs = append(reqs, request{at: t, client: client, method: m, path: p, ua: ua})
		}
	}
	browse := func() (string, string) {
		if rng.IntN(5) == 0 {
			return "POST", "/api/cart"
		}
		return "GET", fmt.Sprintf("/api/products/%d", rng.IntN(500))
	}
	// 200 shoppers: each logs in, then a request every 20 to 90 s.
	for i := range 200 {
		client := fmt.Sprintf("198.51.100.%d", i+1)
		ua := "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
		from := start.Add(time.Duration(rng.Int64N(int64(8 * time.Minute))))
		reqs = append(reqs, request{at: from, client: client, method: "POST", path: "/login", ua: ua})
		mean := time.Duration(20+rng.IntN(70)) * time.Second
		every(client, ua, from, end, func() time.Duration { return mean/2 + time.Duration(rng.Int64N(int64(mean))) }, browse)
	}
	// 2 busier clients (a partner's integration): one every 2.5 s, 24 a minute.
	for _, c := range []string{"198.51.100.221", "198.51.100.222"} {
		every(c, "partner-sync/2.3", start, end, func() time.Duration { return 2500 * time.Millisecond },
			func() (string, string) { return "GET", fmt.Sprintf("/api/products/%d", rng.IntN(500)) })
	}
	// A scraper from 12:02 to 12:07: 4 requests a second.
	every("203.0.113.66", "python-requests/2.31.0", start.Add(2*time.Minute), start.Add(7*time.Minute),
		func() time.Duration { return 250 * time.Millisecond },
		func() (string, string) {
			return "GET", fmt.Sprintf("/api/products/%d?page=%d", rng.IntN(500), rng.IntN(9))
		})
	// A credential stuffer from 12:03 to 12:07: /login every 2 s.
	every("203.0.113.99", "Go-http-client/1.1", start.Add(3*time.Minute), start.Add(7*time.Minute),
		func() time.Duration { return 2 * time.Second }, func() (string, string) { return "POST", "/login" })
	// A burst at the window edge of 12:06: 40 requests in the second before it, 40 in the
	// second from it.
	edge := start.Add(6 * time.Minute)
	for i := range 40 {
		for _, at := range []time.Time{edge.Add(-time.Second + time.Duration(i)*20*time.Millisecond), edge.Add(time.Duration(i) * 20 * time.Millisecond)} {
			reqs = append(reqs, request{at: at, client: "192.0.2.10", method: "GET", path: "/api/products/7", ua: "curl/8.5.0"})
		}
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].at.Before(reqs[j].at) })
	f, err := os.Create("access.log.gz")
	if err != nil {
		panic(err)
	}
	z := gzip.NewWriter(f) // no name, no time: the same bytes every run
	w := bufio.NewWriter(z)
	for _, r := range reqs {
		status, size := 200, 512+rng.IntN(4096)
		fmt.Fprintf(w, "%s - - [%s] \"%s %s HTTP/1.1\" %d %d \"-\" \"%s\"\n",
			r.client, r.at.Format("02/Jan/2006:15:04:05 -0700"), r.method, r.path, status, size, r.ua)
	}
	if err := w.Flush(); err != nil {
		panic(err)
	}
	if err := z.Close(); err != nil {
		panic(err)
	}
	if err := f.Close(); err != nil {
		panic(err)
	}
}

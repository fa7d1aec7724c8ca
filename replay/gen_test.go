package replay

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// event is one request of the test traffic, at a whole second (the resolution every format
// logs, the combined one included).
type event struct {
	at     time.Time
	client string
	path   string
}

// testStart is the first instant of the test traffic: window edges fall at whole minutes.
var testStart = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// The clients of the test traffic.
const (
	scraper = "10.9.9.9" // 2 requests a second: 12 x the limit of 10 a minute
	burster = "10.7.7.7" // 10 requests the second before a minute edge, 10 at the edge
)

// steadyClient is steady client i: one request every 6 s (the limit, 10 a minute, exactly)
// for even i, every 5 s (12 a minute) for odd i, from second i.
func steadyClient(i int) (addr string, every time.Duration) {
	every = 6 * time.Second
	if i%2 == 1 {
		every = 5 * time.Second
	}
	return fmt.Sprintf("10.0.0.%d", i+1), every
}

// testTraffic is 10 minutes of known traffic: 20 steady clients, a scraper, and a burst at
// the window edge of 12:04:00.
func testTraffic() []event {
	var evs []event
	end := testStart.Add(10 * time.Minute)
	for i := range 20 {
		addr, every := steadyClient(i)
		for t := testStart.Add(time.Duration(i) * time.Second); t.Before(end); t = t.Add(every) {
			evs = append(evs, event{at: t, client: addr, path: "/api/items"})
		}
	}
	for t := testStart; t.Before(end); t = t.Add(time.Second) {
		evs = append(evs, event{at: t, client: scraper, path: "/api/items?page=1"}, event{at: t, client: scraper, path: "/api/items?page=2"})
	}
	edge := testStart.Add(4 * time.Minute)
	for range 10 {
		evs = append(evs, event{at: edge.Add(-time.Second), client: burster, path: "/api/cart"}, event{at: edge, client: burster, path: "/api/cart"})
	}
	sortEvents(evs)
	return evs
}

func sortEvents(evs []event) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
}

func fmtAddr(net, i int) string { return fmt.Sprintf("10.%d.%d.%d", net, i/250, i%250+1) }

// testFormat is how the test writes a log of one format, and the format and fields that
// read it.
type testFormat struct {
	name, spec, fields string
	header             string // the first line (CSV)
	line               func(i int, e event) string
}

// The test formats. Each line's fields follow the real formats: Envoy's default format
// (EnvoyDefaultFormat, the docs' example line shape: [2016-04-15T20:17:00.310Z] "POST
// /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28" "nsq2http"
// "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "tcp://10.0.2.1:80"), Envoy
// Gateway's JSON (EnvoyGatewayJSONFields, as kubectl logs shows it), nginx's combined
// (escaping " as \x22) and Apache's (escaping it as \").
var testFormats = []testFormat{
	{name: "envoy", spec: "envoy", line: func(i int, e event) string {
		return fmt.Sprintf(`[%s] "GET %s HTTP/1.1" 200 - 0 %d %d %d "%s" "curl/8.5.0" "%08x-cf5c-432b-8c7e-98aeb7988cd2" "shop.example" "10.1.2.3:8080"`,
			e.at.Format("2006-01-02T15:04:05.000Z"), e.path, 100+i%50, i%7, i%5, e.client, i)
	}},
	{name: "envoy-json", spec: "envoy-json", line: func(i int, e event) string {
		m := map[string]any{":authority": "shop.example", "bytes_received": 0, "bytes_sent": 466, "connection_termination_details": nil,
			"downstream_local_address": "10.244.0.14:3000", "downstream_remote_address": e.client + ":34805", "duration": 1,
			"method": "GET", "protocol": "HTTP/1.1", "requested_server_name": nil, "response_code": 200, "response_code_details": "via_upstream",
			"response_flags": "-", "route_name": "httproute/default/backend/rule/0/match/0/backend", "start_time": e.at.Format("2006-01-02T15:04:05.000Z"),
			"upstream_cluster": "httproute/default/backend/rule/0", "upstream_host": "10.244.0.13:3000", "upstream_local_address": "10.244.0.14:58822",
			"upstream_transport_failure_reason": nil, "user-agent": "curl/7.88.1", "x-envoy-origin-path": e.path,
			"x-envoy-upstream-service-time": nil, "x-forwarded-for": e.client, "x-request-id": fmt.Sprintf("ab1e4da7-5f1d-45ea-bb4a-%012x", i)}
		b, _ := json.Marshal(m)
		return string(b)
	}},
	{name: "nginx", spec: "combined", line: func(i int, e event) string {
		return fmt.Sprintf(`%s - - [%s] "GET %s HTTP/1.1" 200 %d "-" "Mozilla/5.0 (X11; \x22%d\x22)"`,
			e.client, e.at.Format(clfLayout), e.path, 100+i%50, i)
	}},
	{name: "apache", spec: "combined", line: func(i int, e event) string {
		return fmt.Sprintf(`%s - frank [%s] "GET %s HTTP/1.0" 200 %d "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav) \"%d\""`,
			e.client, e.at.Format(clfLayout), e.path, 100+i%50, i)
	}},
	{name: "json", spec: "json", fields: "time=ts,client=ip,method=verb,path=uri", line: func(i int, e event) string {
		return fmt.Sprintf(`{"ts": %d.000, "ip": %q, "verb": "GET", "uri": %q, "status": 200, "nested": {"a": [1, 2]}}`, e.at.Unix(), e.client, e.path)
	}},
	{name: "csv", spec: "csv", fields: "time=timestamp,client=client_ip", header: "timestamp,client_ip,method,path,status",
		line: func(i int, e event) string {
			return fmt.Sprintf(`%s,%s,GET,"%s",200`, e.at.Format(time.RFC3339), e.client, strings.ReplaceAll(e.path, `"`, `""`))
		}},
}

// writeLog writes the events as a log of format f into dir, gzipped when gz, with a
// malformed line before each index of bad; it returns the path.
func writeLog(t testing.TB, dir string, f testFormat, evs []event, gz bool, bad ...int) string {
	t.Helper()
	var b bytes.Buffer
	if f.header != "" {
		b.WriteString(f.header + "\n")
	}
	for i, e := range evs {
		for _, k := range bad {
			if k == i {
				b.WriteString("this line is not a request\n")
			}
		}
		b.WriteString(f.line(i, e) + "\n")
	}
	path := filepath.Join(dir, f.name+".log")
	data := b.Bytes()
	if gz {
		path += ".gz"
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clientip"
)

// The fixtures are the other systems' own example lines, verbatim (joined where their
// documentation wraps a line):
//
//   - envoyDocsLine: Envoy's docs, docs/root/configuration/observability/access_log/usage.rst,
//     "Example of the default Envoy access log format" (envoyproxy/envoy 8165dda80df0, the
//     same in 1.9 to 1.36);
//   - testdata/envoy-gateway-access.json: Envoy Gateway's docs,
//     site/content/en/latest/troubleshooting/configuration.md, the access log of its default
//     JSON format as kubectl logs | jq prints it (envoyproxy/gateway d32f28294245, v1.9);
//   - apacheDocsLine: Apache httpd's docs, docs/manual/logs.xml, "Combined Log Format"
//     (apache/httpd 0cb680442eca, 2.5.1-dev), and its docs/conf/httpd.conf.in's
//     LogFormat "%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\"" combined;
//   - nginxTestsLine: nginx-tests' access_log.t, what nginx writes by default (the combined
//     format) for GET /combined (nginx/nginx-tests 76bb761cdcae), with its [\E .* \Q] date
//     as one of nginx's; nginxTestsEscape: the same test's "escape - default" line, nginx's
//     escaping of " and control bytes as \xHH.
const (
	envoyDocsLine    = `[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28" "nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "tcp://10.0.2.1:80"`
	apacheDocsLine   = `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`
	nginxTestsLine   = `127.0.0.1 - - [21/Jul/2026:16:32:31 +0400] "GET /combined HTTP/1.0" 200 2 "-" "-"`
	nginxTestsEscape = `/escape/\x221 \x1B\x1C \x22-2`
)

func parseLine(t *testing.T, spec, fields, line string) *Record {
	t.Helper()
	f, err := ParseFormat(spec, fields)
	if err != nil {
		t.Fatal(err)
	}
	r := newLogReader(f, true, nil)
	var got *Record
	err = r.line([]byte(line), &Record{}, func(rec *Record) error {
		c := *rec
		c.Headers = append([]Header(nil), rec.Headers...)
		got = &c
		return nil
	})
	if err != nil || got == nil {
		t.Fatalf("%s: %v", spec, err)
	}
	return got
}

func clientOf(rec *Record, trusted ...string) string {
	res, _ := clientip.New(trusted)
	var q request
	q.reset(rec, res)
	return q.clientKey()
}

func TestFormatsReadTheirOwnExamples(t *testing.T) {
	gw, err := os.ReadFile("testdata/envoy-gateway-access.json")
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, gw); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, spec, line                string
		at                              string
		method, target, authority, peer string
		client                          string
		header, value                   string
	}{
		{"envoy docs", "envoy", envoyDocsLine, "2016-04-15T20:17:00.31Z", "POST", "/api/v1/locations", "locations", "", "10.0.35.28", "user-agent", "nsq2http"},
		{"envoy gateway docs", "envoy-json", compact.String(), "2025-03-08T02:25:32.588Z", "GET", "/get", "www.example.com", "192.168.65.4:45050", "192.168.65.4", "x-request-id", "54c4c2f9-d209-4aa0-8870-342bc6622d1a"},
		{"apache docs", "combined", apacheDocsLine, "2000-10-10T20:55:36Z", "GET", "/apache_pb.gif", "", "127.0.0.1", "127.0.0.1", "referer", "http://www.example.com/start.html"},
		{"nginx tests", "combined", nginxTestsLine, "2026-07-21T12:32:31Z", "GET", "/combined", "", "127.0.0.1", "127.0.0.1", "", ""},
		{"nginx escape", "combined", `127.0.0.1 - - [21/Jul/2026:16:32:31 +0400] "GET ` + nginxTestsEscape + ` HTTP/1.0" 200 2 "-" "-"`,
			"2026-07-21T12:32:31Z", "GET", "/escape/\"1 \x1b\x1c \"-2", "", "127.0.0.1", "127.0.0.1", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := parseLine(t, c.spec, "", c.line)
			if at := time.Unix(0, rec.At).UTC().Format(time.RFC3339Nano); at != c.at {
				t.Errorf("time %s, want %s", at, c.at)
			}
			if rec.Method != c.method || rec.Target != c.target || rec.Authority != c.authority || rec.Peer != c.peer {
				t.Errorf("read %q %q %q peer %q, want %q %q %q %q", rec.Method, rec.Target, rec.Authority, rec.Peer, c.method, c.target, c.authority, c.peer)
			}
			if got := clientOf(rec); got != c.client {
				t.Errorf("client %q, want %q", got, c.client)
			}
			if v, ok := rec.header(c.header); c.header != "" && (!ok || v != c.value) {
				t.Errorf("header %s: %q, want %q", c.header, v, c.value)
			}
		})
	}
}

// TestClientPastTrustedProxies: the client of a line is found as sluice proxy finds a live
// request's: the peer, past the trusted proxies by X-Forwarded-For; Envoy's default format
// logs no peer, and its last X-Forwarded-For entry (the address Envoy decided on) stands
// for it.
func TestClientPastTrustedProxies(t *testing.T) {
	line := `[2016-04-15T20:17:00.310Z] "GET / HTTP/1.1" 200 - 0 0 1 1 "203.0.113.9, 10.0.0.7" "ua" "id" "host" "up"`
	rec := parseLine(t, "envoy", "", line)
	if got := clientOf(rec); got != "10.0.0.7" {
		t.Errorf("untrusted: %s, want the last entry 10.0.0.7", got)
	}
	if got := clientOf(rec, "10.0.0.0/8"); got != "203.0.113.9" {
		t.Errorf("10.0.0.0/8 trusted: %s, want 203.0.113.9", got)
	}
	rec = parseLine(t, "nginx:$remote_addr [$time_local] \"$request\" \"$http_x_forwarded_for\"",
		"", `10.0.0.1 [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" "198.51.100.4"`)
	if got := clientOf(rec); got != "10.0.0.1" {
		t.Errorf("untrusted peer: %s", got)
	}
	if got := clientOf(rec, "10.0.0.1"); got != "198.51.100.4" {
		t.Errorf("trusted peer: %s", got)
	}
}

func TestParseFormatErrors(t *testing.T) {
	for _, c := range []struct{ spec, fields, want string }{
		{"apache", "", "format: unknown"},
		{"json", "time", "fields:"},
		{"json", "when=ts", `fields: unknown field "when"`},
		{"csv", "time=a,time=b", "fields: time is mapped twice"},
		{"combined", "time=ts", "fields: the combined format names its own fields"},
		{"envoy:%REQ(:PATH)% %PROTOCOL%", "", "format: no field holds the time"},
		{"envoy:[%START_TIME%]%PROTOCOL%%RESPONSE_CODE%", "", "follows another field"},
		{"envoy:[%START_TIME%] %BAD", "", "opens no operator"},
		{"nginx:$ [$time_local]", "", "names no variable"},
	} {
		_, err := ParseFormat(c.spec, c.fields)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v, want an error with %q", c.spec, c.fields, err, c.want)
		}
	}
}

// TestMalformedReasonsHoldNoValues: a malformed line's reason names what is wrong, never a
// value of the line (request values stay out of messages).
func TestMalformedReasonsHoldNoValues(t *testing.T) {
	secret := "sk-live-0123456789"
	for _, c := range []struct{ spec, fields, line string }{
		{"combined", "", `127.0.0.1 - - [` + secret + `] "GET / HTTP/1.0" 200 2 "-" "-"`},
		{"combined", "", `127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "` + secret + `" 200 2 "-" "-"`},
		{"json", "", `{"time": "` + secret + `"}`},
		{"json", "", `{"time": 1, "cost": "` + secret + `"}`},
		{"csv", "", `1,` + secret},
	} {
		f, _ := ParseFormat(c.spec, c.fields)
		r := newLogReader(f, false, nil)
		if f.csv != nil {
			_ = r.csv.header("time,cost")
		}
		_ = r.line([]byte(c.line), &Record{}, func(*Record) error { return nil })
		if r.malformed.Count != 1 || strings.Contains(r.malformed.Lines[0].Reason, secret) {
			t.Errorf("%s: %+v", c.line, r.malformed)
		}
	}
}

package replay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzJSONLine: the JSON-lines scanner never panics, and on a valid JSON object it reads
// the mapped string fields exactly as encoding/json decodes them.
func FuzzJSONLine(f *testing.F) {
	for _, s := range []string{`{"method":"GET","path":"/a\u00e9\"b","time":"2024-01-01T00:00:00Z"}`,
		`{"a":[1,{"b":null}],"method":"\ud83d\ude00","path":"x"}`, `{}`, `{"method":1e5}`, `[1]`, `{"method":"\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		format, err := ParseFormat("json", "time=t")
		if err != nil {
			t.Fatal(err)
		}
		var rec Record
		err = format.json.parse(line, &rec, &timeCache{})
		var obj map[string]any
		if json.Unmarshal([]byte(line), &obj) != nil || obj == nil || strings.Contains(line, `"t"`) || !utf8.ValidString(line) {
			return // not an object (encoding/json decodes null into a map as nil), a time the scanner may reject, or bytes encoding/json replaces: only no panic
		}
		if err != nil {
			t.Fatalf("valid JSON %q: %v", line, err)
		}
		for key, got := range map[string]string{"method": rec.Method, "path": rec.Target, "authority": rec.Authority} {
			want, _ := obj[key].(string)
			if want == "-" {
				want = ""
			}
			if _, isNumber := obj[key].(float64); isNumber {
				continue
			}
			if got != want {
				t.Fatalf("%q: %s = %q, encoding/json says %q", line, key, got, want)
			}
		}
	})
}

// TestCombinedRoundTrip: any request nginx logs in its combined format (quotes and bytes
// outside printable ASCII escaped as \xHH, as ngx_http_log_escape does) reads back as it was.
func TestCombinedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	format, _ := ParseFormat("combined", "")
	text := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	for i := range 2000 {
		target := "/" + strings.ReplaceAll(text(rng.IntN(40)), "\n", "")
		ua := text(rng.IntN(60))
		at := time.Unix(rng.Int64N(4e9), 0).In(time.FixedZone("", (rng.IntN(49)-24)*1800))
		logged := nginxEscape(ua)
		if ua == "" {
			logged = "-"
		}
		line := fmt.Sprintf(`192.0.2.%d - - [%s] "GET %s HTTP/1.1" 200 %d "-" "%s"`, i%256, at.Format(clfLayout), nginxEscape(target), i, logged)
		var rec Record
		if err := format.text.parse(line, &rec, &timeCache{}); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		gotUA, _ := rec.header("user-agent")
		if ua == "-" {
			ua = "" // nginx logs an empty value as -: a header of just - reads as absent
		}
		if rec.Target != target || gotUA != ua || rec.At != at.UnixNano() || rec.Method != "GET" {
			t.Fatalf("%q read as %q %q %d, want %q %q %d", line, rec.Target, gotUA, rec.At, target, ua, at.UnixNano())
		}
	}
}

// nginxEscape is ngx_http_log_escape: ", \ and bytes below 0x20 or above 0x7e as \xHH.
func nginxEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			fmt.Fprintf(&b, `\x%02X`, c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// FuzzTextLine: a text format never panics on any line, and a line it reads has a time.
func FuzzTextLine(f *testing.F) {
	f.Add(envoyDocsLine)
	f.Add(apacheDocsLine)
	f.Add(nginxTestsLine)
	f.Add(`1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "GET /\" HTTP/1.0" 200 2 "\\" "\x"`)
	envoy, _ := ParseFormat("envoy", "")
	combined, _ := ParseFormat("combined", "")
	f.Fuzz(func(t *testing.T, line string) {
		for _, format := range []*Format{envoy, combined} {
			r := newLogReader(format, false, nil)
			_ = r.line([]byte(line), &Record{}, func(rec *Record) error {
				if rec.At == 0 {
					t.Fatalf("%q: a record without a time", line)
				}
				return nil
			})
		}
	})
}

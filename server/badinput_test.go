package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

func badRequests() map[string]*rlsv3.RateLimitRequest {
	many := make([]*rlcommon.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc("remote_address", fmt.Sprint(i))
	}
	mb := strings.Repeat("v", 1<<20)
	r := func(descs ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
		return &rlsv3.RateLimitRequest{Domain: "golden", Descriptors: descs}
	}
	badUnit := desc("remote_address", "x")
	badUnit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 42}
	// Deliberate difference: envoyproxy/ratelimit accepts all of these hostile values (and
	// sends them to its store); Sluice refuses them at once (docs/OPERATIONS.md).
	// An unknown domain, a descriptor without entries, an entry without a key and an override
	// of 0 requests are not errors: envoyproxy/ratelimit answers them (peer_test.go).
	return map[string]*rlsv3.RateLimitRequest{
		"empty domain":          {Descriptors: []*rlcommon.RateLimitDescriptor{desc("remote_address", "x")}},
		"no descriptors":        r(),
		"10k descriptors":       r(many...),
		"1 MB value":            r(desc("remote_address", mb)),
		"1 MB key":              r(desc(mb, "x")),
		"brace { in key":        r(desc("remote{address", "x")),
		"brace } in key":        r(desc("remote}address", "x")),
		"newline in key":        r(desc("remote\naddress", "x")),
		"NUL in key":            r(desc("remote\x00address", "x")),
		"newline in value":      r(desc("remote_address", "a\nb")),
		"NUL in value":          r(desc("remote_address", "a\x00b")),
		"override unknown unit": r(badUnit),
	}
}

func TestBadInputGRPC(t *testing.T) {
	h := start(t, goldenRules)
	for name, rq := range badRequests() {
		start := time.Now()
		_, err := h.client.ShouldRateLimit(context.Background(), rq)
		took := time.Since(start)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT", name, err)
			continue
		}
		if msg := status.Convert(err).Message(); len(msg) > 400 {
			t.Errorf("%s: message of %d bytes echoes the input", name, len(msg))
		}
		t.Logf("%-24s %8v  %s", name, took.Round(time.Microsecond), status.Convert(err).Message())
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for invalid requests", n)
	}
}

// rawCodec sends bytes as they are, to deliver malformed protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { return nil }
func (rawCodec) Name() string                       { return "proto" }

var _ encoding.Codec = rawCodec{}

// TestMalformedProtobuf sends raw bytes that are not a RateLimitRequest over a real
// connection: INVALID_ARGUMENT with the decoding error, no store call.
func TestMalformedProtobuf(t *testing.T) {
	h := start(t, goldenRules)
	for _, garbage := range [][]byte{
		{0xff, 0xff, 0xff},                   // invalid tag
		{0x0a, 0x50, 'x'},                    // domain longer than the message
		bytes.Repeat([]byte{0x12}, 100),      // descriptors, truncated
		{0x0a, 0x02, 0xc3, 0x28},             // domain not UTF-8
		{0x12, 0x04, 0x0a, 0x02, 0x0a, 0x7f}, // entry truncated inside a descriptor
	} {
		var out []byte
		start := time.Now()
		err := h.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
			garbage, &out, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%x: got %v, want INVALID_ARGUMENT", garbage, err)
			continue
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "not a valid RateLimitRequest protobuf") {
			t.Errorf("%x: message %q does not say what is wrong", garbage, msg)
		}
		t.Logf("%x: %v: %s", garbage, time.Since(start).Round(time.Microsecond), status.Convert(err).Message())
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for malformed requests", n)
	}
	// An empty (but well-formed) request is still an ordinary invalid request.
	var out []byte
	err := h.conn.Invoke(context.Background(), "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
		[]byte{}, &out, grpc.ForceCodec(rawCodec{}))
	if msg := status.Convert(err).Message(); status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "domain: empty") {
		t.Errorf("empty request: %v", err)
	}
	// The server still works.
	if got := summary(h.ask(t, "golden", desc("remote_address", "x"))); !strings.HasPrefix(got, "OK") {
		t.Errorf("after garbage: %s", got)
	}
}

func TestBadInputHTTP(t *testing.T) {
	h := start(t, goldenRules, func(c *serverConfig) { c.MaxBodyBytes = 4 << 20 })
	post := func(path, body string) (int, string) {
		resp, err := http.Post(h.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for name, rq := range badRequests() {
		body, err := protojson.Marshal(rq)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/json", "/v1/allow"} {
			if code, msg := post(path, string(body)); code != http.StatusBadRequest {
				t.Errorf("%s %s: %d %.200s", path, name, code, msg)
			}
		}
	}
	for name, body := range map[string]string{
		"not JSON":              "{",
		"array":                 "[]",
		"unknown field":         `{"domain":"golden","descriptors":[{"entries":[{"key":"a"}]}],"colour":1}`,
		"key without rule":      `{"key":"k"}`,
		"key with bad rule":     `{"key":"k","rule":{"limit":0,"period":"1s"}}`,
		"key with bad period":   `{"key":"k","rule":{"limit":1,"period":"soon"}}`,
		"key with bad algo":     `{"key":"k","rule":{"limit":1,"period":"1s","algorithm":"magic"}}`,
		"key with NUL":          `{"key":"a\u0000b","rule":{"limit":1,"period":"1s"}}`,
		"key with brace":        `{"key":"a{b}","rule":{"limit":1,"period":"1s"}}`,
		"negative n":            `{"key":"k","rule":{"limit":1,"period":"1s"},"n":-1}`,
		"key form extra field":  `{"key":"k","rule":{"limit":1,"period":"1s"},"x":1}`,
		"body over the maximum": `{"key":"` + strings.Repeat("k", 5<<20) + `"}`,
	} {
		if code, msg := post("/v1/allow", body); code != http.StatusBadRequest {
			t.Errorf("/v1/allow %s: %d %.200s", name, code, msg)
		}
	}
	if code, _ := post("/json", "garbage"); code != http.StatusBadRequest {
		t.Errorf("/json garbage: %d", code)
	}
	resp, err := http.Get(h.base + "/v1/allow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/allow: %d", resp.StatusCode)
	}
	if n := h.store.Calls(); n != 0 {
		t.Errorf("%d store calls for invalid requests", n)
	}
	if line := h.metric(t, `sluice_invalid_requests_total{transport="http"}`); line == "" || strings.HasSuffix(line, " 0") {
		t.Errorf("invalid metric: %q", line)
	}
}

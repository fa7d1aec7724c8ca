// Package otlptest is an OTLP trace receiver for tests: OTLP/HTTP (protobuf, gzip or not) and
// OTLP/gRPC on 127.0.0.1, decoding each ExportTraceServiceRequest into Spans a test can check
// for names, parents and attributes, and keeping the raw bodies so a test can check that a
// value never left the process.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, flattened.
type Span struct {
	Name              string
	TraceID, SpanID   string // hex
	ParentSpanID      string // hex; "" for a root span
	Kind              string // SPAN_KIND_SERVER, ...
	Attributes        map[string]string
	Resource          map[string]string // the resource's attributes (service.name, ...)
	StatusCode        string            // STATUS_CODE_UNSET, _OK, _ERROR
	InstrumentationSc string            // the instrumentation scope's name
}

// Receiver receives OTLP traces. Its cleanup stops it.
type Receiver struct {
	// URL is the OTLP/HTTP endpoint's base URL (http://127.0.0.1:port): exporters post to
	// URL + "/v1/traces".
	URL string
	// GRPCURL is the OTLP/gRPC endpoint (http://127.0.0.1:port, plain text).
	GRPCURL string

	mu    sync.Mutex
	spans []Span
	raw   [][]byte
}

// NewReceiver starts a receiver on 127.0.0.1, both transports.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	hs := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(hs.Close)
	r.URL = hs.URL
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(gs, grpcService{r: r})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	r.GRPCURL = "http://" + lis.Addr().String()
	return r
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(b, &msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, msg *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	b, _ := proto.Marshal(msg)
	g.r.add(b, msg)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(raw []byte, msg *collectorpb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, raw)
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Kind: s.GetKind().String(), Attributes: attrs(s.GetAttributes()), Resource: res,
					StatusCode: s.GetStatus().GetCode().String(), InstrumentationSc: ss.GetScope().GetName()})
			}
		}
	}
}

// attrs flattens attributes to strings (arrays as their values joined by ",").
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		if x.BoolValue {
			return "true"
		}
		return "false"
	case *commonpb.AnyValue_ArrayValue:
		var b bytes.Buffer
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(value(e))
		}
		return b.String()
	}
	return v.String()
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Received reports whether any request body received so far contains b (a raw value that
// must never leave the process, say).
func (r *Receiver) Received(b []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range r.raw {
		if bytes.Contains(raw, b) {
			return true
		}
	}
	return false
}

// WaitSpans waits up to timeout until a span named name has arrived, and returns every span
// received then (nil, after the timeout, if none has that name).
func (r *Receiver) WaitSpans(name string, timeout time.Duration) []Span {
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		for _, s := range spans {
			if s.Name == name {
				return spans
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

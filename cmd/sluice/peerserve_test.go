package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The black-box harness of the envoyproxy/ratelimit tests: sluice serve runs in a child
// process (this test binary, re-run with peerChildEnv), configured only by its flags or by
// the environment given, and is asked over RLS gRPC and over the peer's HTTP /json.

const peerChildEnv = "SLUICE_TEST_PEER_SERVE"

// TestPeerServeChild is sluice serve in the child process; it does nothing otherwise.
func TestPeerServeChild(t *testing.T) {
	args, ok := os.LookupEnv(peerChildEnv)
	if !ok {
		t.Skip("the child process of the envoyproxy/ratelimit tests")
	}
	os.Exit(run(append([]string{"serve"}, strings.Fields(args)...), os.Stdout, os.Stderr))
}

// served is a running sluice serve.
type served struct {
	grpcAddr, httpAddr string
	debugAddr, metrics string
	client             rlsv3.RateLimitServiceClient
	conn               *grpc.ClientConn
	mu                 sync.Mutex
	lines              []string
}

// startServe starts sluice serve with args in an environment of env (nil: this process's),
// waits until it serves and stops it (SIGTERM) when the test ends.
func startServe(t *testing.T, env []string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeerServeChild$")
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env, peerChildEnv+"="+strings.Join(args, " "))
	return startServeCmd(t, cmd, args)
}

// startServeCmd is startServe of cmd, a sluice serve with args.
func startServeCmd(t *testing.T, cmd *exec.Cmd, args []string) *served {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{}
	up := make(chan [4]string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.lines = append(s.lines, line)
			s.mu.Unlock()
			var rec struct{ Msg, GRPC, HTTP, Debug, Metrics string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "sluice serving" {
				up <- [4]string{rec.GRPC, rec.HTTP, rec.Debug, rec.Metrics}
			} else if strings.Contains(line, ` msg="sluice serving" `) { // the text format (no LOG_FORMAT)
				up <- [4]string{textAttr(line, "grpc"), textAttr(line, "http"), textAttr(line, "debug"), textAttr(line, "metrics")}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
	select {
	case a := <-up:
		s.grpcAddr, s.httpAddr, s.debugAddr, s.metrics = a[0], a[1], a[2], a[3]
	case <-done:
		t.Fatalf("sluice serve %v exited: %q", args, s.log())
	case <-time.After(15 * time.Second):
		t.Fatalf("sluice serve %v did not start: %q", args, s.log())
	}
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.conn, s.client = conn, rlsv3.NewRateLimitServiceClient(conn)
	return s
}

// textAttr is the value of attribute key in a line of slog's text format ("" when absent).
func textAttr(line, key string) string {
	_, rest, ok := strings.Cut(line, " "+key+"=")
	if !ok {
		return ""
	}
	if strings.HasPrefix(rest, `"`) {
		v, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return ""
		}
		u, _ := strconv.Unquote(v)
		return u
	}
	v, _, _ := strings.Cut(rest, " ")
	return v
}

func (s *served) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// ask sends req over transport ("grpc" or "json") and returns the answer; over /json the
// HTTP status must be the peer's (200, or 429 when over the limit).
func (s *served) ask(t *testing.T, transport string, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	if transport == "grpc" {
		resp, err := s.client.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		return resp
	}
	body, _ := protojson.Marshal(req)
	code, text := s.post(t, "/json", string(body))
	var resp rlsv3.RateLimitResponse
	if err := protojson.Unmarshal([]byte(text), &resp); err != nil {
		t.Fatalf("/json %s: %d %q: %v", body, code, text, err)
	}
	want := http.StatusOK
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		want = http.StatusTooManyRequests
	}
	if code != want {
		t.Errorf("/json %s: HTTP %d, want %d", body, code, want)
	}
	return &resp
}

func (s *served) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+s.httpAddr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (s *served) get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkSeries fails for each metric line (name{labels} value) that /metrics lacks.
func (s *served) checkSeries(t *testing.T, lines ...string) {
	t.Helper()
	_, text := s.get(t, s.httpAddr, "/metrics")
	for _, l := range lines {
		if !strings.Contains(text, "\n"+l+"\n") {
			name, _, _ := strings.Cut(l, "{")
			var have []string
			for _, x := range strings.Split(text, "\n") {
				if strings.HasPrefix(x, name) {
					have = append(have, x)
				}
			}
			t.Errorf("/metrics lacks %s; has %q", l, have)
		}
	}
}

// peerSummary is an RLS answer in one line: the overall code, then per descriptor its code,
// its current limit ("20/MINUTE", with the limit's name) and limit_remaining.
func peerSummary(r *rlsv3.RateLimitResponse) string {
	parts := []string{r.OverallCode.String()}
	for _, st := range r.Statuses {
		p := st.Code.String()
		if l := st.CurrentLimit; l != nil {
			p += fmt.Sprintf(" %d/%s", l.RequestsPerUnit, l.Unit)
			if l.Name != "" {
				p += " " + l.Name
			}
		}
		parts = append(parts, p+" rem="+strconv.FormatUint(uint64(st.LimitRemaining), 10))
	}
	return strings.Join(parts, "; ")
}

// rlReq builds a request: each descriptor is key, value, key, value...
func rlReq(domain string, hits uint32, descs ...[]string) *rlsv3.RateLimitRequest {
	r := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, kv := range descs {
		d := &rlcommon.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		r.Descriptors = append(r.Descriptors, d)
	}
	return r
}

// peerCase is one request and the answer envoyproxy/ratelimit gives it.
type peerCase struct {
	name string // the peer's test the case comes from, and what it checks
	req  *rlsv3.RateLimitRequest
	want string // peerSummary of the answer
}

func runPeerCases(t *testing.T, s *served, transport string, cases []peerCase) {
	t.Helper()
	for _, c := range cases {
		if got := peerSummary(s.ask(t, transport, c.req)); got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, got, c.want)
		}
	}
}

// peerStores runs f on each store: memory, and the Redis of SLUICE_REDIS_ADDR (each run
// under a key prefix of its own), giving the flags that select it.
func peerStores(t *testing.T, f func(t *testing.T, storeArgs []string)) {
	t.Run("memory", func(t *testing.T) { f(t, []string{"--store", "memory"}) })
	t.Run("redis", func(t *testing.T) {
		addr := testenv.RedisAddr(t)
		// servePeer makes the prefix unique; the timeout is generous: these tests check
		// answers, not latency, on a machine whose other tests share the Redis and the CPUs.
		f(t, []string{"--store", "redis://" + addr + "/0", "--store-prefix", "sluice-peer-", "--store-timeout", "2s"})
	})
}

func uniq() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// peerFixture is a rules file of the peer's test/config, copied under testdata.
func peerFixture(name string) string { return "testdata/envoyproxy-ratelimit/config/" + name }

// servePeer starts sluice serve on 127.0.0.1:0 with JSON logs, the given store (a
// --store-prefix made unique, so that each server starts from empty counters) and args.
func servePeer(t *testing.T, storeArgs []string, args ...string) *served {
	t.Helper()
	all := []string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json"}
	for i, a := range storeArgs {
		if i > 0 && storeArgs[i-1] == "--store-prefix" {
			a += uniq() + ":"
		}
		all = append(all, a)
	}
	return startServe(t, nil, append(all, args...)...)
}

// forTransports runs f over gRPC and over /json, each against a server of its own.
func forTransports(t *testing.T, f func(t *testing.T, transport string)) {
	for _, tr := range []string{"grpc", "json"} {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}

func hitsOf(d []string, n uint64) *rlsv3.RateLimitRequest {
	r := rlReq("test-domain", 0, d)
	r.Descriptors[0].HitsAddend = wrapperspb.UInt64(n)
	return r
}

package server_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// FuzzHTTPAPI (issue 16, item 10): any body on the JSON endpoints (/json's RLS decoding,
// /v1/allow and /v1/settle in both forms, descriptor to key) is answered without a panic and
// without a 500: bad input is a 4xx naming what is wrong.
func FuzzHTTPAPI(f *testing.F) {
	for _, seed := range []string{
		`{"domain":"golden","descriptors":[{"entries":[{"key":"tenant","value":"a"}]}],"hitsAddend":3}`,
		`{"key":"k","rule":{"algorithm":"gcra","limit":5,"period":"1s"},"n":2,"criticality":"SHEDDABLE"}`,
		`{"key":"k","rule":{"algorithm":"sliding_log","limit":5,"period":"1m"},"delta":-3}`,
		`{"domain":"golden","descriptors":[{"entries":[{"key":"criticality","value":"x"}]},{"entries":[]}]}`,
		`{"key":"k","key":"k"}`,
		"{\"key\":\"\xff\"}",
		`[`,
	} {
		for path := range uint8(3) {
			f.Add(path, []byte(seed))
		}
	}
	clock := sluicetest.NewManualClock(t0)
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		f.Fatal(err)
	}
	defer mem.Close()
	srv, err := server.New(server.Config{Config: rls.Config{Store: mem, ReloadInterval: -1, Rules: compile(f, goldenRules)}, GRPCAddr: "-", HTTPAddr: "-"})
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	paths := []string{"/json", "/v1/allow", "/v1/settle"}
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		p := paths[int(path)%len(paths)]
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, p, bytes.NewReader(body)))
		switch {
		case rec.Code >= 500:
			t.Fatalf("%s %q: %d %s", p, body, rec.Code, rec.Body)
		case rec.Code >= 400 && !strings.Contains(rec.Body.String(), "error"):
			t.Fatalf("%s %q: %d without an error message: %s", p, body, rec.Code, rec.Body)
		}
	})
}

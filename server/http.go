package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/server/admin"
)

// Handler returns the HTTP API: POST /v1/allow, POST /v1/settle, the budget API (POST
// /v1/reserve, /v1/commit, /v1/cancel: budget.go), /json, GET /metrics,
// /healthz, /readyz, envoyproxy/ratelimit's GET /healthcheck and /rlconfig, the live view
// GET /v1/top and /ui, and the gateways' doors: /v1/forward-auth/{domain} (forwardauth.go),
// /v1/ext-authz/{domain}/... and POST /v1/leases/release.
func (s *Server) Handler() http.Handler {
	mux := s.adminMux(apiEndpoints)
	mux.HandleFunc("POST /v1/allow", s.withBody(s.handleAllow))
	mux.HandleFunc("POST /v1/settle", s.withBody(s.handleSettle))
	mux.HandleFunc("POST /v1/reserve", s.withBody(s.handleReserve))
	mux.HandleFunc("POST /v1/commit", s.withBody(s.handleCommit))
	mux.HandleFunc("POST /v1/cancel", s.withBody(s.handleCancel))
	mux.HandleFunc("/json", s.withBody(s.handleJSON)) // any method, as the peer's
	mux.HandleFunc("GET /healthcheck", s.handleHealthcheck)
	mux.HandleFunc("GET /rlconfig", s.handleRLConfig)
	mux.HandleFunc("/v1/forward-auth", s.handleForwardAuth) // any method: NGINX's subrequest keeps the client's
	mux.HandleFunc("/v1/forward-auth/{domain}", s.handleForwardAuth)
	mux.HandleFunc("POST /v1/leases/release", s.handleRelease)
	extAuthz := http.HandlerFunc(s.handleExtAuthzHTTP)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// before the mux, which would redirect the unclean paths Envoy passes as they came
		if strings.HasPrefix(r.URL.Path, extAuthzPrefix) {
			extAuthz.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// AdminHandler returns the endpoints of operators only: GET /metrics, /healthz, /readyz,
// /v1/top and /ui (package admin), without the rate-limit API.
func (s *Server) AdminHandler() http.Handler { return s.adminMux(nil) }

func (s *Server) adminMux(api []admin.Endpoint) *http.ServeMux {
	return admin.Handler(admin.Config{Engine: s.eng, Metrics: s.registry, Serving: s.ready.Load, Waiting: s.gate.reason, Invalid: s.metrics.httpInvalid.Inc, API: api})
}

// apiEndpoints are the routes of Handler that the index page GET / lists.
var apiEndpoints = []admin.Endpoint{
	{Method: "POST", Path: "/v1/allow", What: `decide: {"domain":...,"descriptors":[...]} under the rules, or {"key":...,"rule":{...}}`},
	{Method: "POST", Path: "/v1/settle", What: "charge or refund the difference once a cost is known"},
	{Method: "POST", Path: "/v1/reserve", What: `hold an estimate on a budget: {"key", "rule", "estimate", "mode"}`},
	{Method: "POST", Path: "/v1/commit", What: `end a reservation at its real cost: {"key", "rule", "id", "actual"}`},
	{Method: "POST", Path: "/v1/cancel", What: `end a reservation at no cost: {"key", "rule", "id"}`},
	{Method: "POST", Path: "/json", What: "envoyproxy/ratelimit's JSON API"},
	{Method: "GET", Path: "/healthcheck", What: "envoyproxy/ratelimit's health check"},
	{Method: "GET", Path: "/rlconfig", What: "the rules in force"},
	{Method: "ANY", Path: "/v1/forward-auth/{domain}", What: "forward-auth for NGINX auth_request, Caddy forward_auth, Traefik ForwardAuth"},
	{Method: "ANY", Path: "/v1/ext-authz/{domain}/...", What: "Envoy ext_authz, HTTP form (the gRPC form is on the gRPC port)"},
	{Method: "POST", Path: "/v1/leases/release", What: "give back the in-flight slots of a Sluice-Lease"},
}

var writeJSON = admin.WriteJSON

// writeError answers an error (an rls.Error or a gRPC status error) with the matching HTTP
// status and a JSON body.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	st := status.Convert(statusError(err))
	code := http.StatusInternalServerError
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
		s.metrics.httpInvalid.Inc()
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	case codes.Canceled, codes.DeadlineExceeded:
		code = http.StatusGatewayTimeout
	}
	writeJSON(w, code, admin.ErrorBody{Error: st.Message(), Code: st.Code().String()})
}

func isInvalid(err error) bool { return status.Code(err) == codes.InvalidArgument }

// withBody adapts a handler of a request body: it times the request into the HTTP latency
// histogram and reads the body (see readBody), answering a bad body with an error itself.
func (s *Server) withBody(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { s.metrics.httpLatency.Observe(time.Since(start).Seconds()) }()
		body, err := s.readBody(w, r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		h(w, r, body)
	}
}

// readBody reads a bounded request body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, invalid("body: more than %d bytes", tooBig.Limit)
		}
		return nil, invalid("body: %v", err)
	}
	return body, nil
}

// handleJSON is envoyproxy/ratelimit's /json endpoint: the RLS request and response in
// protobuf JSON; 429 when over limit.
func (s *Server) handleJSON(w http.ResponseWriter, r *http.Request, body []byte) {
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.writeError(w, invalid("body: not a RateLimitRequest in protobuf JSON: %v", err))
		return
	}
	ctx, traced := s.traceJSON(r, &req)
	resp, err := s.decide(ctx, &req)
	if traced != nil {
		traced(resp, err)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		s.writeError(w, status.Error(codes.Internal, err.Error()))
		return
	}
	code := http.StatusOK
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(out)
}

// ruleJSON is a rule in the /v1/allow API.
type ruleJSON struct {
	Algorithm  string `json:"algorithm"`
	Limit      int64  `json:"limit"`
	Period     string `json:"period"`
	Burst      int64  `json:"burst"`
	SubWindows int    `json:"sub_windows"`
}

// allowRequest is the key form of POST /v1/allow and /v1/settle. Rule is a ruleJSON object (a
// rule supplied by the request) or a string naming a limit of the rules config. N is the cost
// of /v1/allow, Delta the cost of /v1/settle (each is refused by the other).
type allowRequest struct {
	Key   string          `json:"key"`
	Rule  json.RawMessage `json:"rule"`
	N     *int64          `json:"n"`
	Delta *int64          `json:"delta"`
	// Criticality is the request's class (criticality.go); a rule supplied by the request
	// then shares its capacity between classes by sluice.DefaultShares.
	Criticality string `json:"criticality"`
}

// DecisionJSON is a decision in the /v1/allow API. Durations are milliseconds;
// retry_after_ms is -1 when the request can never be allowed.
type DecisionJSON struct {
	Allowed      bool   `json:"allowed"`
	Code         string `json:"code,omitempty"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
}

// AllowResponse is the answer of POST /v1/allow: the combined decision, and one per
// descriptor for the descriptors form.
type AllowResponse struct {
	DecisionJSON
	Descriptors []DecisionJSON `json:"descriptors,omitempty"`
}

// decisionJSON is d, decided under rules of period period (the longest). A request that can
// never be allowed has retry_after_ms -1 and the positive reset of sluice.Decision.ResetIn,
// rounded up to the millisecond (never 0: a client told 0 retries at once).
func decisionJSON(d sluice.Decision, period time.Duration) DecisionJSON {
	out := DecisionJSON{Allowed: d.Allowed, Limit: d.Capacity, Remaining: d.Remaining,
		RetryAfterMs: d.RetryAfter.Milliseconds(), ResetAfterMs: d.ResetAfter.Milliseconds()}
	if d.RetryAfter < 0 {
		out.RetryAfterMs, out.ResetAfterMs = -1, ceilMs(d.ResetIn(period))
	}
	return out
}

// longestPeriod is the longest period of lim's rules (0 for none, or no lim).
func longestPeriod(lim *config.Limit) time.Duration {
	var p time.Duration
	if lim != nil {
		for _, r := range lim.Rules {
			p = max(p, r.Period)
		}
	}
	return p
}

// ceilMs is d in whole milliseconds, rounded up; 0 for d <= 0.
func ceilMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// handleAllow is POST /v1/allow: either {"key", "rule", "n"} decided directly, or
// {"domain", "descriptors", "hits_addend"} decided against the rules like an RLS request.
func (s *Server) handleAllow(w http.ResponseWriter, r *http.Request, body []byte) {
	s.handleKeyOrDescriptors(w, r, body, false)
}

// handleSettle is POST /v1/settle, a cost known only after the request was served (see
// sluice.Limiter.Settle): the same two forms as /v1/allow, with the same checks, applied
// whatever the limit. The key form {"key", "rule", "delta"} settles delta units (negative: a
// refund); the descriptors form settles hits_addend units (is_negative_hits: a refund) on every
// limit of every descriptor. The answer is always allowed, with remaining 0 and
// retry_after_ms, when the key is in debt, until the debt is paid.
func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request, body []byte) {
	s.handleKeyOrDescriptors(w, r, body, true)
}

// handleKeyOrDescriptors is /v1/allow, or /v1/settle when settle.
func (s *Server) handleKeyOrDescriptors(w http.ResponseWriter, r *http.Request, body []byte, settle bool) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		s.writeError(w, invalid("body: not a JSON object: %v", err))
		return
	}
	if err := checkStrictJSON(body); err != nil {
		s.writeError(w, err)
		return
	}
	_, hasDomain := probe["domain"]
	_, hasDescriptors := probe["descriptors"]
	if hasDomain || hasDescriptors {
		if settle {
			s.settleDescriptors(w, r.Context(), body)
		} else {
			s.allowDescriptors(w, r.Context(), body)
		}
		return
	}
	var req allowRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		cost := "n"
		if settle {
			cost = "delta"
		}
		s.writeError(w, invalid("body: want {\"key\", \"rule\", \"%s\"} or {\"domain\", \"descriptors\"}: %v", cost, err))
		return
	}
	key, lim, n, err := s.checkAllow(&req, settle)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var d sluice.Decision
	if settle {
		d, err = s.eng.SettleKey(r.Context(), key, lim, n)
	} else {
		d, err = s.eng.DecideKey(r.Context(), key, lim, n, req.Criticality)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AllowResponse{DecisionJSON: decisionJSON(d, longestPeriod(lim))})
}

// checkAllow checks a key-form request (of /v1/settle when settle) and returns its key, its
// limit (no rules for an unlimited named limit) and its cost.
func (s *Server) checkAllow(req *allowRequest, settle bool) (string, *config.Limit, int64, error) {
	if err := s.eng.CheckKey(req.Key); err != nil {
		return "", nil, 0, err
	}
	lim, err := s.keyRules(req.Rule)
	if err != nil {
		return "", nil, 0, err
	}
	if err := s.eng.CheckKeyRules(req.Key, lim); err != nil {
		return "", nil, 0, err
	}
	n, err := checkCost(req, settle)
	if err != nil {
		return "", nil, 0, err
	}
	return req.Key, lim, n, nil
}

// maxCost bounds the n of /v1/allow, as the engine bounds a descriptor's cost: anything
// above every rule's capacity is simply denied.
const maxCost = sluice.MaxLimit + 1

// checkCost returns a key-form request's cost: n for /v1/allow (default 1), delta for
// /v1/settle (required).
func checkCost(req *allowRequest, settle bool) (int64, error) {
	if !settle {
		if req.Delta != nil {
			return 0, invalid("delta: only for /v1/settle; /v1/allow takes \"n\"")
		}
		n := int64(1)
		if req.N != nil {
			n = *req.N
		}
		if n < 0 || n > maxCost {
			return 0, invalid("n: must be between 0 and %d, got %d", int64(maxCost), n)
		}
		return n, nil
	}
	switch {
	case req.N != nil:
		return 0, invalid("n: /v1/settle takes \"delta\", the real cost minus what was taken")
	case req.Delta == nil:
		return 0, invalid("delta: missing")
	case *req.Delta < -sluice.MaxLimit || *req.Delta > sluice.MaxLimit:
		return 0, invalid("delta: must be between %d and %d, got %d", -int64(sluice.MaxLimit), int64(sluice.MaxLimit), *req.Delta)
	}
	return *req.Delta, nil
}

// keyRules returns the limit of a key-form request's "rule": the rule it supplies, checked
// against the ceilings, or the configured limit it names.
func (s *Server) keyRules(raw json.RawMessage) (*config.Limit, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, invalid("rule: missing")
	case raw[0] == '"':
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, invalid("rule: %v", err)
		}
		return s.eng.NamedLimit("rule", name)
	case raw[0] == '{':
		if err := s.eng.AllowSuppliedRule("rule"); err != nil {
			return nil, err
		}
		rule, err := parseRule(raw)
		if err != nil {
			return nil, err
		}
		if err := s.eng.CheckSuppliedRule("rule", "rule.period", rule); err != nil {
			return nil, err
		}
		return &config.Limit{Rules: []sluice.Rule{rule}}, nil
	}
	return nil, invalid("rule: want a rule {\"limit\", \"period\", ...} or the name of a configured limit, got %s", rls.Quote(string(raw)))
}

// parseRule decodes and validates a rule supplied by a request.
func parseRule(raw json.RawMessage) (sluice.Rule, error) {
	var rj ruleJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return sluice.Rule{}, invalid("rule: want {\"algorithm\", \"limit\", \"period\", \"burst\", \"sub_windows\"}: %v", err)
	}
	rule := sluice.Rule{Algorithm: sluice.AlgorithmSlidingWindow, Limit: rj.Limit, Burst: rj.Burst, SubWindows: rj.SubWindows}
	if rj.Algorithm != "" {
		a, err := sluice.ParseAlgorithm(rj.Algorithm)
		if err != nil {
			return sluice.Rule{}, invalidRule(err)
		}
		rule.Algorithm = a
	}
	p, err := time.ParseDuration(rj.Period)
	if err != nil {
		return sluice.Rule{}, invalid("rule.period: want a duration like 1s, 30s or 1m, got %s", rls.Quote(rj.Period))
	}
	rule.Period = p
	if err := rule.Validate(); err != nil {
		return sluice.Rule{}, invalidRule(err)
	}
	return rule, nil
}

// invalidRule answers a rule that sluice refuses, naming its field in the request ("rule.limit").
func invalidRule(err error) error {
	var fe *sluice.FieldError
	if !errors.As(err, &fe) {
		return invalid("rule: %v", err)
	}
	return invalid("rule.%s: %s", fe.Field, fe.Reason)
}

// allowDescriptors is the descriptors form of /v1/allow.
func (s *Server) allowDescriptors(w http.ResponseWriter, ctx context.Context, body []byte) {
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.writeError(w, invalid("body: want {\"domain\", \"descriptors\": [{\"entries\": [{\"key\", \"value\"}]}], \"hits_addend\"}: %v", err))
		return
	}
	c := getCall()
	defer c.release()
	if err := s.decideCall(ctx, c, &req); err != nil {
		s.writeError(w, err)
		return
	}
	resp := s.response(&c.ans)
	out := AllowResponse{Descriptors: make([]DecisionJSON, len(resp.Statuses))}
	out.Allowed = resp.OverallCode == rlsv3.RateLimitResponse_OK
	out.Code = resp.OverallCode.String()
	out.Remaining = -1
	for i, st := range resp.Statuses {
		d := DecisionJSON{Allowed: st.Code == rlsv3.RateLimitResponse_OK, Code: st.Code.String(),
			Remaining: int64(st.LimitRemaining), Limit: -1}
		if st.CurrentLimit != nil {
			d.Limit = int64(st.CurrentLimit.RequestsPerUnit)
			d.ResetAfterMs = st.DurationUntilReset.AsDuration().Milliseconds()
			if !d.Allowed {
				d.RetryAfterMs = d.ResetAfterMs
				if c.ans.Verdicts[i].Never {
					d.RetryAfterMs = -1
				}
			}
			if out.Remaining < 0 || d.Remaining < out.Remaining {
				out.Limit, out.Remaining = d.Limit, d.Remaining
			}
			out.ResetAfterMs = max(out.ResetAfterMs, d.ResetAfterMs)
			if out.RetryAfterMs >= 0 && d.RetryAfterMs < 0 {
				out.RetryAfterMs = -1 // the request can never be allowed
			} else if out.RetryAfterMs >= 0 {
				out.RetryAfterMs = max(out.RetryAfterMs, d.RetryAfterMs)
			}
		} else {
			d.Remaining = -1
		}
		out.Descriptors[i] = d
	}
	if out.Remaining < 0 { // nothing limited
		out.Limit = -1
	}
	writeJSON(w, http.StatusOK, out)
}

// settleDescriptors is the descriptors form of /v1/settle: every limit of every descriptor
// that has one settles its cost (hits_addend, negative with is_negative_hits), whatever the
// limit and whatever its shadow mode. The answer has the /v1/allow shape, always allowed.
func (s *Server) settleDescriptors(w http.ResponseWriter, ctx context.Context, body []byte) {
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.writeError(w, invalid("body: want {\"domain\", \"descriptors\": [{\"entries\": [{\"key\", \"value\"}]}], \"hits_addend\"}: %v", err))
		return
	}
	var c call // not pooled: settles are not the hot path
	if err := c.read(&req); err != nil {
		s.writeError(w, err)
		return
	}
	items, err := s.eng.Settle(ctx, &c.req, nil)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := AllowResponse{DecisionJSON: DecisionJSON{Allowed: true, Code: codeOK.String(), Limit: -1, Remaining: -1},
		Descriptors: make([]DecisionJSON, len(items))}
	var limited []sluice.Check
	for i, it := range items {
		if !it.Settles {
			limit := int64(-1) // unlimited
			if it.Block {
				limit = 0
			}
			out.Descriptors[i] = DecisionJSON{Allowed: true, Code: codeOK.String(), Limit: limit, Remaining: limit}
			continue
		}
		out.Descriptors[i] = decisionJSON(it.Decision, 0)
		out.Descriptors[i].Code = codeOK.String()
		limited = append(limited, sluice.Check{Decision: it.Decision})
	}
	if len(limited) > 0 {
		out.DecisionJSON = decisionJSON(rls.CombineSettled(limited), 0)
		out.Code = codeOK.String()
	}
	writeJSON(w, http.StatusOK, out)
}

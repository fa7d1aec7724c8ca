package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// Handler returns the HTTP API: POST /v1/allow, POST /v1/settle, /json, GET /metrics,
// /healthz, /readyz, envoyproxy/ratelimit's GET /healthcheck and /rlconfig, and the live view
// GET /v1/top and /ui.
func (s *Server) Handler() http.Handler {
	mux := s.adminMux()
	mux.HandleFunc("POST /v1/allow", s.withBody(s.handleAllow))
	mux.HandleFunc("POST /v1/settle", s.withBody(s.handleSettle))
	mux.HandleFunc("/json", s.withBody(s.handleJSON)) // any method, as the peer's
	mux.HandleFunc("GET /healthcheck", s.handleHealthcheck)
	mux.HandleFunc("GET /rlconfig", s.handleRLConfig)
	return mux
}

// AdminHandler returns the endpoints of operators only: GET /metrics, /healthz and /readyz,
// without the rate-limit API (sluice proxy serves it on its admin address).
func (s *Server) AdminHandler() http.Handler { return s.adminMux() }

func (s *Server) adminMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("GET /v1/top", s.handleTop)
	mux.HandleFunc("GET /ui", s.handleUI)
	return mux
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// writeError answers a gRPC status error with the matching HTTP status and a JSON body.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
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
	writeJSON(w, code, errorBody{Error: st.Message(), Code: st.Code().String()})
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
	resp, err := s.decide(r.Context(), &req)
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

func decisionJSON(d sluice.Decision) DecisionJSON {
	out := DecisionJSON{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		RetryAfterMs: d.RetryAfter.Milliseconds(), ResetAfterMs: d.ResetAfter.Milliseconds()}
	if d.RetryAfter < 0 {
		out.RetryAfterMs = -1
	}
	return out
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
	if len(lim.Rules) == 0 { // a named limit that is unlimited
		s.metrics.keyDecisions[1].Inc()
		writeJSON(w, http.StatusOK, AllowResponse{DecisionJSON: DecisionJSON{Allowed: true, Limit: -1, Remaining: -1}})
		return
	}
	var d sluice.Decision
	if settle {
		d, err = s.settleKey(r.Context(), key, lim, n)
	} else {
		d, err = s.decideKey(r.Context(), key, s.classLimit(lim, req.Criticality), n, s.classOf(req.Criticality))
	}
	if err != nil {
		s.writeError(w, s.storeError(r.Context(), err))
		return
	}
	if !settle {
		s.metrics.keyDecisions[b2i(d.Allowed)].Inc()
	}
	writeJSON(w, http.StatusOK, AllowResponse{DecisionJSON: decisionJSON(d)})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkAllow checks a key-form request (of /v1/settle when settle) and returns its key, its
// limit (no rules for an unlimited named limit) and its cost.
func (s *Server) checkAllow(req *allowRequest, settle bool) (string, *config.Limit, int64, error) {
	if req.Key == "" {
		return "", nil, 0, invalid("key: empty")
	}
	if len(req.Key) > s.maxKeyLen {
		return "", nil, 0, invalid("key: %d bytes, more than the maximum of %d", len(req.Key), s.maxKeyLen)
	}
	if err := config.CheckKey(req.Key); err != nil {
		return "", nil, 0, invalid("key %s: %v", quote(req.Key), err)
	}
	lim, err := s.keyRules(req.Rule)
	if err != nil {
		return "", nil, 0, err
	}
	rules := lim.Rules
	if len(rules) > 1 && len(req.Key)+4 > s.maxKeyLen { // ruleKey's "|#N"
		return "", nil, 0, invalid("key: %d bytes, more than the maximum of %d for a limit of %d rules", len(req.Key), s.maxKeyLen-4, len(rules))
	}
	n, err := checkCost(req, settle)
	if err != nil {
		return "", nil, 0, err
	}
	return req.Key, lim, n, nil
}

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
		if n < 0 || n > maxHits {
			return 0, invalid("n: must be between 0 and %d, got %d", int64(maxHits), n)
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
		if s.requestRules.mode == RequestRulesOff {
			return nil, s.requestRules.supplied("rule")
		}
		l, err := s.rules.Load().namedLimit("rule", name)
		if err != nil {
			return nil, err
		}
		return l, nil
	case raw[0] == '{':
		if err := s.requestRules.supplied("rule"); err != nil {
			return nil, err
		}
		rule, err := parseRule(raw)
		if err != nil {
			return nil, err
		}
		if err := s.requestRules.check("rule", "rule.period", rule); err != nil {
			return nil, err
		}
		return &config.Limit{Rules: []sluice.Rule{rule}}, nil
	}
	return nil, invalid("rule: want a rule {\"limit\", \"period\", ...} or the name of a configured limit, got %s", quote(string(raw)))
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
		return sluice.Rule{}, invalid("rule.period: want a duration like 1s, 30s or 1m, got %s", quote(rj.Period))
	}
	rule.Period = p
	if err := rule.Validate(); err != nil {
		return sluice.Rule{}, invalidRule(err)
	}
	return rule, nil
}

// decideKey decides n units of key under every rule of lim (the second and later rules of a
// named limit count under ruleKey(key, i), as descriptors do; per-instance rules on the
// instance's memory): all must admit.
func (s *Server) decideKey(ctx context.Context, key string, lim *config.Limit, n int64, class sluice.Criticality) (sluice.Decision, error) {
	checks := make([]sluice.Check, len(lim.Rules))
	for i, r := range lim.Rules {
		checks[i] = sluice.Check{Key: checkKey(lim, key, i), Rule: r, N: n}
		if sh := lim.SharesOf(i); sh != nil && n > 0 {
			checks[i].Reserve = sh.Reserve(class, r.Capacity())
		}
	}
	l := s.limiterFor(checks)
	if len(checks) == 1 && checks[0].Reserve == 0 {
		return l.AllowN(ctx, checks[0].Key, checks[0].Rule, n)
	}
	if n > 0 {
		return l.AllowAll(ctx, checks)
	}
	allowed := true // a peek: each rule on its own (AllowAll takes at least one unit)
	for i := range checks {
		d, err := l.AllowN(ctx, checks[i].Key, checks[i].Rule, 0)
		if err != nil {
			return sluice.Decision{}, err
		}
		checks[i].Decision, allowed = d, allowed && d.Allowed
	}
	d, _ := sluice.Combine(checks, allowed)
	return d, nil
}

// settleKey settles delta units of key under every rule, keyed as decideKey keys them.
func (s *Server) settleKey(ctx context.Context, key string, lim *config.Limit, delta int64) (sluice.Decision, error) {
	checks := make([]sluice.Check, len(lim.Rules))
	for i, r := range lim.Rules {
		checks[i] = sluice.Check{Key: checkKey(lim, key, i), Rule: r, N: delta}
	}
	if err := s.settleChecks(ctx, checks); err != nil {
		return sluice.Decision{}, err
	}
	return settled(checks), nil
}

// settleChecks settles each check's N on its own, filling in its Decision (a per-instance
// limit's on this instance's memory).
func (s *Server) settleChecks(ctx context.Context, checks []sluice.Check) error {
	l := s.limiterFor(checks)
	for i := range checks {
		c := &checks[i]
		d, err := l.Settle(ctx, c.Key, c.Rule, c.N)
		if err != nil {
			return err
		}
		c.Decision = d
	}
	return nil
}

// settled combines the decisions of settled checks: allowed, the binding check's Limit and
// Remaining, the longest ResetAfter and the longest RetryAfter (until every debt is paid).
func settled(checks []sluice.Check) sluice.Decision {
	d, _ := sluice.Combine(checks, true)
	for _, c := range checks {
		d.RetryAfter = max(d.RetryAfter, c.Decision.RetryAfter)
	}
	return d
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
	var never []bool
	resp, err := s.decideInto(ctx, &req, func(items []item) {
		never = make([]bool, len(items))
		for i := range items {
			never[i] = items[i].never()
		}
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
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
				if never[i] {
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
	items, err := s.settleInto(ctx, &req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := AllowResponse{DecisionJSON: DecisionJSON{Allowed: true, Code: codeOK.String(), Limit: -1, Remaining: -1},
		Descriptors: make([]DecisionJSON, len(items))}
	var limited []sluice.Check
	for i := range items {
		it := &items[i]
		if !it.settles() {
			limit := int64(-1) // unlimited
			if it.block {
				limit = 0
			}
			out.Descriptors[i] = DecisionJSON{Allowed: true, Code: codeOK.String(), Limit: limit, Remaining: limit}
			continue
		}
		out.Descriptors[i] = decisionJSON(it.decision)
		out.Descriptors[i].Code = codeOK.String()
		limited = append(limited, sluice.Check{Decision: it.decision})
	}
	if len(limited) > 0 {
		out.DecisionJSON = decisionJSON(settled(limited))
		out.Code = codeOK.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// readiness probes the store at most once a second.
type readiness struct {
	store   sluice.Store
	checked atomic.Int64
	ok      atomic.Bool
}

// handleReady answers 200 "ready" once serving while the store takes a write; 200
// "degraded: ..." while a fallback decides because the store is unavailable (503 with
// ?strict); 503 while starting, shutting down, or when the store fails without a fallback.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeText(w, http.StatusServiceUnavailable, "not ready: starting or shutting down")
		return
	}
	if s.fallback == nil || s.fallback.degraded() == "" { // the fallback's probe runs already
		if err := s.readyCheck.check(r.Context()); err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: store: "+err.Error())
			return
		}
	}
	if s.fallback != nil {
		if why := s.fallback.degraded(); why != "" {
			code := http.StatusOK
			if r.URL.Query().Has("strict") {
				code = http.StatusServiceUnavailable
			}
			writeText(w, code, "degraded: "+why)
			return
		}
	}
	writeText(w, http.StatusOK, "ready")
}

// readyRule is the rule of the readiness probe: a write that always admits, on a key that
// lives a second.
var readyRule = sluice.FixedWindow(sluice.MaxLimit, time.Second)

// check takes one unit of the readiness key, so a store that answers reads but refuses
// writes (Redis out of memory, a read-only replica) is not ready; a success is trusted for a
// second.
func (rc *readiness) check(ctx context.Context) error {
	now := time.Now().UnixNano()
	if now-rc.checked.Load() < int64(time.Second) {
		if rc.ok.Load() {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := rc.store.Take(ctx, sluice.Request{Key: "sluice|readyz", Rule: readyRule, N: 1})
	rc.ok.Store(err == nil)
	rc.checked.Store(now)
	return err
}

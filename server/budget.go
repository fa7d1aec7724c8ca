package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// The budget API: a reservation of an estimate before the work and its commit at the real cost
// after it, by any gateway (sluice.Limiter.ReserveAll over HTTP). The key and the rule are the
// /v1/allow key form's (a rule supplied or a configured limit named, each rule a budget);
// the commit names the key, the rule and the id the reserve answered.

// reserveRequest is the body of POST /v1/reserve.
type reserveRequest struct {
	Key      string          `json:"key"`
	Rule     json.RawMessage `json:"rule"`
	Estimate *int64          `json:"estimate"`
	// Mode is "bounded" (default) or "strict" (sluice.BudgetMode).
	Mode string `json:"mode"`
	// TTL is how long the reservation lives uncommitted, a duration ("30s"); "" is the
	// rule's period.
	TTL string `json:"ttl"`
	// OnExpiry is what an expired reservation costs: "charge" (default, what it held) or
	// "free".
	OnExpiry string `json:"on_expiry"`
}

// commitRequest is the body of POST /v1/commit and /v1/cancel (which takes no "actual").
type commitRequest struct {
	Key    string          `json:"key"`
	Rule   json.RawMessage `json:"rule"`
	ID     string          `json:"id"`
	Actual *int64          `json:"actual"`
}

// ReserveResponse is the answer of POST /v1/reserve: the decision and, when admitted, the
// reservation's id; when refused, which rule of the limit refused it (its index, 0 for a rule
// supplied by the request), with retry_after_ms until it frees.
type ReserveResponse struct {
	ID string `json:"id,omitempty"`
	DecisionJSON
	DeniedRule *int `json:"denied_rule,omitempty"`
}

// handleReserve is POST /v1/reserve {"key", "rule", "estimate", "mode", "ttl", "on_expiry"}.
func (s *Server) handleReserve(w http.ResponseWriter, r *http.Request, body []byte) {
	var req reserveRequest
	if err := decodeStrict(body, &req, `{"key", "rule", "estimate", "mode", "ttl", "on_expiry"}`); err != nil {
		s.writeError(w, err)
		return
	}
	lim, err := s.budgetLimit(req.Key, req.Rule)
	if err != nil {
		s.writeError(w, err)
		return
	}
	b, err := parseBudget(&req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.eng.ReserveKey(r.Context(), req.Key, lim, *req.Estimate, b)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := ReserveResponse{DecisionJSON: decisionJSON(res.Decision, longestPeriod(lim))}
	if res.Decision.Allowed && len(res.Holds) > 0 {
		out.ID = res.Holds[0].ID.String()
	} else if res.Denied >= 0 {
		out.DeniedRule = &res.Denied
	}
	writeJSON(w, http.StatusOK, out)
}

// handleCommit is POST /v1/commit {"key", "rule", "id", "actual"}.
func (s *Server) handleCommit(w http.ResponseWriter, r *http.Request, body []byte) {
	s.commit(w, r, body, false)
}

// handleCancel is POST /v1/cancel {"key", "rule", "id"}: a commit at no cost.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, body []byte) {
	s.commit(w, r, body, true)
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request, body []byte, cancel bool) {
	var req commitRequest
	want := `{"key", "rule", "id", "actual"}`
	if cancel {
		want = `{"key", "rule", "id"}`
	}
	if err := decodeStrict(body, &req, want); err != nil {
		s.writeError(w, err)
		return
	}
	var actual int64
	switch {
	case cancel && req.Actual != nil:
		s.writeError(w, invalid("actual: /v1/cancel commits nothing; /v1/commit takes \"actual\""))
		return
	case !cancel && req.Actual == nil:
		s.writeError(w, invalid("actual: missing"))
		return
	case !cancel:
		actual = *req.Actual
	}
	if actual < 0 || actual > sluice.MaxLimit {
		s.writeError(w, invalid("actual: must be between 0 and %d, got %d", int64(sluice.MaxLimit), actual))
		return
	}
	id, err := sluice.ParseReservationID(req.ID)
	if err != nil {
		s.writeError(w, invalid("id: %s", fieldReason(err)))
		return
	}
	lim, err := s.budgetLimit(req.Key, req.Rule)
	if err != nil {
		s.writeError(w, err)
		return
	}
	d, err := s.eng.CommitKey(r.Context(), req.Key, lim, id, actual)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, AllowResponse{DecisionJSON: decisionJSON(d, longestPeriod(lim))})
}

// decodeStrict decodes a key-form body into v, refusing unknown fields, fields given twice and
// strings that are not UTF-8 (checkStrictJSON); want names the fields in the error.
func decodeStrict(body []byte, v any, want string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("body: want %s: %v", want, err)
	}
	return checkStrictJSON(body)
}

// budgetLimit checks a budget request's key and rule, as /v1/allow's key form does, and
// returns its limit.
func (s *Server) budgetLimit(key string, rule json.RawMessage) (*config.Limit, error) {
	if err := s.eng.CheckKey(key); err != nil {
		return nil, err
	}
	lim, err := s.keyRules(rule)
	if err != nil {
		return nil, err
	}
	if err := s.eng.CheckKeyRules(key, lim); err != nil {
		return nil, err
	}
	return lim, nil
}

// parseBudget checks a reserve's estimate, mode, TTL and expiry.
func parseBudget(req *reserveRequest) (sluice.Budget, error) {
	var b sluice.Budget
	switch {
	case req.Estimate == nil:
		return b, invalid("estimate: missing")
	case *req.Estimate < 0 || *req.Estimate > sluice.MaxLimit:
		return b, invalid("estimate: must be between 0 and %d, got %d", int64(sluice.MaxLimit), *req.Estimate)
	}
	mode, err := sluice.ParseBudgetMode(req.Mode)
	if err != nil {
		return b, invalid("mode: want bounded or strict")
	}
	b.Mode = mode
	if req.TTL != "" {
		if b.TTL, err = time.ParseDuration(req.TTL); err != nil || b.TTL <= 0 {
			return b, invalid("ttl: want a positive duration like 30s or 1m")
		}
	}
	switch req.OnExpiry {
	case "", "charge":
	case "free":
		b.FreeOnExpiry = true
	default:
		return b, invalid("on_expiry: want charge or free")
	}
	return b, nil
}

// fieldReason is the reason of a *sluice.FieldError, or the error's text.
func fieldReason(err error) string {
	if fe, ok := err.(*sluice.FieldError); ok {
		return fe.Reason
	}
	return err.Error()
}

package rls

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/config"
)

// requestRules is what a request may bring as its own rule: Config.RequestRules and the
// ceilings, with defaults applied.
type requestRules struct {
	mode     string // RequestRulesAny, RequestRulesNamed or RequestRulesOff
	logLimit int64
	period   time.Duration
	state    int64
}

// newRequestRules validates the request-rule settings of cfg and applies their defaults.
func newRequestRules(cfg Config) (requestRules, error) {
	rr := requestRules{mode: cfg.RequestRules, logLimit: cfg.MaxRequestLogLimit, period: cfg.MaxRequestPeriod, state: cfg.MaxRequestStateBytes}
	var problems []string
	switch rr.mode {
	case "":
		rr.mode = RequestRulesAny
	case RequestRulesAny, RequestRulesNamed, RequestRulesOff:
	default:
		problems = append(problems, fmt.Sprintf("RequestRules: want %s, %s or %s, got %q", RequestRulesAny, RequestRulesNamed, RequestRulesOff, rr.mode))
	}
	switch {
	case rr.logLimit == 0:
		rr.logLimit = DefaultMaxRequestLogLimit
	case rr.logLimit < 0 || rr.logLimit > sluice.MaxSlidingLogLimit:
		problems = append(problems, fmt.Sprintf("MaxRequestLogLimit: must be between 1 and %d, got %d", sluice.MaxSlidingLogLimit, rr.logLimit))
	}
	switch {
	case rr.period == 0:
		rr.period = DefaultMaxRequestPeriod
	case rr.period < sluice.MinPeriod || rr.period > sluice.MaxPeriod:
		problems = append(problems, fmt.Sprintf("MaxRequestPeriod: must be between %v and %v, got %v", sluice.MinPeriod, sluice.MaxPeriod, rr.period))
	}
	switch {
	case rr.state == 0:
		rr.state = DefaultMaxRequestState
	case rr.state < 0:
		problems = append(problems, fmt.Sprintf("MaxRequestStateBytes: must be positive, got %d", rr.state))
	}
	if len(problems) > 0 {
		return rr, fmt.Errorf("rls: %s", strings.Join(problems, "; "))
	}
	return rr, nil
}

// supplied reports why a rule supplied by the request (at field) is refused by the mode, or
// nil when rules may be supplied.
func (rr *requestRules) supplied(field string) error {
	switch rr.mode {
	case RequestRulesOff:
		return invalid("%s: rules chosen by requests are off on this server (request-rules %s)", field, rr.mode)
	case RequestRulesNamed:
		return invalid("%s: this server accepts only rules named from its config (request-rules %s), e.g. \"rule\": \"domain.descriptor_key\"", field, rr.mode)
	}
	return nil
}

// check applies the ceilings to a valid rule supplied by the request at field ("rule",
// "descriptors[0].limit"; its period is at periodField), naming the field and the ceiling.
func (rr *requestRules) check(field, periodField string, r sluice.Rule) error {
	if r.Period > rr.period {
		return invalid("%s: a period of %v is longer than the maximum of %v for a rule supplied by a request (max-request-period)", periodField, r.Period, rr.period)
	}
	// A bucket's state lasts until its burst has refilled: bounded as the period is, so a key
	// lives at most one max-request-period to refill and one to pay a settle's debt.
	if refill := time.Duration(float64(r.Capacity()) * float64(r.Period) / float64(r.Limit)); r.Algorithm.Bucket() && refill > rr.period {
		return invalid("%s.burst: %d units take %v to refill, longer than the maximum of %v for a rule supplied by a request (max-request-period)", field, r.Capacity(), refill, rr.period)
	}
	if r.Algorithm == sluice.AlgorithmSlidingLog && r.Limit > rr.logLimit {
		return invalid("%s.limit: %d is more than the maximum of %d for a sliding_log rule supplied by a request (max-request-log-limit)", field, r.Limit, rr.logLimit)
	}
	if b := requestStateBytes(r); b > rr.state {
		return invalid("%s: its state takes up to %d bytes per key in Redis, more than the maximum of %d for a rule supplied by a request (max-request-state-bytes)", field, b, rr.state)
	}
	return nil
}

// What a key costs in Redis (MEMORY USAGE, measured by TestRequestRuleRedisBytes on Redis
// 7.0; docs/OPERATIONS.md): a key of the bucket, window and GCRA algorithms 104 to 120 bytes;
// a sliding log, a sorted set, 118 to 125 bytes per entry once past 128 entries (about 40,
// packed, below) and up to 2 x limit entries while a settle keeps the key in debt.
const (
	redisKeyBytes      = 128
	redisLogEntryBytes = 128
)

// requestStateBytes is the most state a key under r can hold, as the max-request-state-bytes
// ceiling counts it: Redis's cost, the largest of the stores (algorithm.StateBytes, the memory
// store's, counts 16 bytes per entry of a sliding log where Redis takes up to 125).
func requestStateBytes(r sluice.Rule) int64 {
	if r.Algorithm == sluice.AlgorithmSlidingLog {
		return redisKeyBytes + 2*r.Limit*redisLogEntryBytes
	}
	return max(redisKeyBytes, algorithm.StateBytes(r))
}

// namedLimits indexes the limits of a config by the names a request may use for them: the
// descriptor path (Limit.FullKey, "domain.key_value.key", as in the metrics) and the
// rate_limit name. A name of several limits maps to nil (ambiguous); a full key always wins.
func namedLimits(cfg *config.Config) map[string]*config.Limit {
	m := make(map[string]*config.Limit)
	full := make(map[string]bool)
	for _, l := range cfg.Limits() {
		m[l.FullKey], full[l.FullKey] = l, true
	}
	for _, l := range cfg.Limits() {
		if l.Name == l.FullKey || full[l.Name] {
			continue
		}
		if o, seen := m[l.Name]; seen && o != l {
			m[l.Name] = nil
			continue
		}
		m[l.Name] = l
	}
	return m
}

// namedLimit returns the limit a request names, or an error naming the field.
func (st *rules) namedLimit(field, name string) (*config.Limit, error) {
	st.namedOnce.Do(func() { st.named = namedLimits(st.cfg) })
	l, ok := st.named[name]
	switch {
	case !ok:
		return nil, invalid("%s: no limit named %s in the rules (a descriptor path like \"domain.key_value.key\", or a rate_limit name)", field, quote(name))
	case l == nil:
		return nil, invalid("%s: %s names several limits: use the descriptor path (\"domain.key_value.key\")", field, quote(name))
	case l.ShadowMode:
		return nil, invalid("%s: %s is in shadow_mode, which applies to descriptors only", field, quote(name))
	}
	return l, nil
}

package config

import (
	"fmt"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota/alloc"
)

// QuotaBucket is one RLQS quota rule of a rules file (the quota_buckets section): which
// buckets it covers, the limit their clients share, and what each client is handed.
type QuotaBucket struct {
	// Name names the rule in metrics and logs; default "<domain>.quota_buckets[i]".
	Name string `yaml:"name"`
	// BucketID matches a bucket id entry by entry: every key listed must be in the bucket id
	// with a matching value (exact, a prefix ending in '*', or "" for any value); keys of the
	// bucket id not listed are ignored. Empty matches every bucket. The first rule of the
	// file that matches a bucket applies.
	BucketID map[string]string `yaml:"bucket_id"`
	// RequestsPerUnit is the limit all clients of a bucket share, per Unit or Period.
	RequestsPerUnit int64 `yaml:"requests_per_unit"`
	// Unit (second, minute, hour, day, month, year) or Period (a Go duration) is the limit's
	// period.
	Unit   string `yaml:"unit"`
	Period string `yaml:"period"`
	// Strategy is what a client is handed: token_bucket (default; its share of the limit as
	// the fill rate and of Burst as the bucket size), requests_per_time_unit (its share per
	// unit; the period must be one unit), allow_all or deny_all (a blanket rule, no limit).
	Strategy string `yaml:"strategy"`
	// Burst is the token bucket size of the whole fleet (default RequestsPerUnit).
	Burst int64 `yaml:"burst"`
	// Fairness splits the limit: max_min (default), proportional or static.
	Fairness string `yaml:"fairness"`
	// StaticShare is each client's share under fairness static, per unit or period.
	StaticShare int64 `yaml:"static_share"`
	// AssignmentTTL is how long an assignment lasts unless renewed (default twice the
	// period, between 1s and 1m); a shrinking share frees the difference after it.
	AssignmentTTL string `yaml:"assignment_ttl"`
	// DefaultDemand is the demand of a client before its first usage report (default
	// RequestsPerUnit: a newcomer gets at most an equal share).
	DefaultDemand int64 `yaml:"default_demand"`
	// History is how many usage reports a client's demand is averaged over (default 4).
	History int `yaml:"history"`
	// AbandonAfter is how long a client's bucket may report no requests before the server
	// abandons it (default: the server's).
	AbandonAfter string `yaml:"abandon_after"`
	// CriticalityKey, when set, names the bucket id entry that carries the criticality class
	// of the demand (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE, any case; missing or
	// unknown: CRITICAL). The entry is left out of the bucket's identity, so every class of a
	// bucket id shares its one limit, and when their demand exceeds it the classes are
	// served most important first (package quota/alloc). It must not be a key of BucketID.
	CriticalityKey *string `yaml:"criticality_key"`
	// OnClose says when the share of a client whose stream closed returns to the pool:
	// "hold" (the default) when its last assignment expires, since an Envoy whose stream
	// broke keeps spending it until then, so the fleet never holds more than the limit;
	// "release" at once, so the others get it sooner, at the cost of up to that share
	// above the limit for one assignment TTL while such an Envoy lives on.
	OnClose string `yaml:"on_close"`
	line    int
}

// The values of QuotaBucket.OnClose.
const (
	QuotaOnCloseHold    = "hold"
	QuotaOnCloseRelease = "release"
)

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (q *QuotaBucket) UnmarshalYAML(n *yaml.Node) error {
	type plain QuotaBucket
	q.line = n.Line
	return decodeFields(n, (*plain)(q))
}

// QuotaStrategy is the kind of RateLimitStrategy a quota rule hands out.
type QuotaStrategy uint8

// The strategies.
const (
	QuotaTokenBucket QuotaStrategy = iota
	QuotaRequestsPerTimeUnit
	QuotaAllowAll
	QuotaDenyAll
)

var quotaStrategyNames = [...]string{"token_bucket", "requests_per_time_unit", "allow_all", "deny_all"}

// String returns the strategy's configuration name.
func (s QuotaStrategy) String() string {
	if int(s) < len(quotaStrategyNames) {
		return quotaStrategyNames[s]
	}
	return "unknown"
}

// MaxQuotaHistory bounds QuotaBucket.History.
const MaxQuotaHistory = 64

// QuotaRule is a compiled quota rule. It is immutable.
type QuotaRule struct {
	// Domain and Name identify the rule.
	Domain, Name string
	// Strategy is what clients are handed; Share says how the limit is split (Limit and
	// Period are zero for allow_all and deny_all).
	Strategy QuotaStrategy
	Share    alloc.Settings
	// Burst is the fleet's token bucket size (token_bucket only).
	Burst int64
	// Unit is the period as an RLS unit (requests_per_time_unit only).
	Unit Unit
	// AbandonAfter is the idle time before a bucket is abandoned; 0 means the server's
	// default.
	AbandonAfter time.Duration
	// CriticalityKey is the bucket id entry carrying the demand's criticality class; "" for
	// none (see QuotaBucket.CriticalityKey and Identity).
	CriticalityKey string
	// File and Line locate the rule.
	File string
	Line int

	keys  []string
	match node
}

// Matches reports whether the rule covers the bucket id. It allocates nothing.
func (r *QuotaRule) Matches(bucket map[string]string) bool {
	for _, k := range r.keys {
		v, ok := bucket[k]
		if !ok {
			return false
		}
		if n, _ := r.match.find(k, v); n == nil {
			return false
		}
	}
	return true
}

// Quota returns the first quota rule of the domain that matches the bucket id, or nil.
func (d *Domain) Quota(bucket map[string]string) *QuotaRule {
	if d == nil {
		return nil
	}
	for _, r := range d.quota {
		if r.Matches(bucket) {
			return r
		}
	}
	return nil
}

// QuotaRules returns the domain's quota rules in file order. The slice must not be modified.
func (d *Domain) QuotaRules() []*QuotaRule {
	if d == nil {
		return nil
	}
	return d.quota
}

func (d *Document) compileQuota(p *problems) []*QuotaRule {
	var out []*QuotaRule
	for i := range d.QuotaBuckets {
		if r := d.compileQuotaBucket(p, &d.QuotaBuckets[i], fmt.Sprintf("quota_buckets[%d]", i)); r != nil {
			out = append(out, r)
		}
	}
	return out
}

func (d *Document) compileQuotaBucket(p *problems, q *QuotaBucket, f string) *QuotaRule {
	bad := func(field, format string, args ...any) { p.add(d.File, q.line, f+"."+field, format, args...) }
	n0 := len(p.errs)
	r := &QuotaRule{Domain: d.Domain, Name: q.Name, File: d.File, Line: q.line}
	if r.Name == "" {
		r.Name = d.Domain + "." + f
	}
	for k := range q.BucketID {
		r.keys = append(r.keys, k)
	}
	sort.Strings(r.keys)
	for _, k := range r.keys {
		v := q.BucketID[k]
		if k == "" {
			bad("bucket_id", "empty key")
		} else if err := CheckKey(k); err != nil {
			bad("bucket_id."+k, "%v", err)
		}
		if err := CheckValue(v); err != nil {
			bad("bucket_id."+k, "%v", err)
		}
		r.match.insert(k, v, &node{})
	}
	switch q.Strategy {
	case "", "token_bucket":
		r.Strategy = QuotaTokenBucket
	case "requests_per_time_unit":
		r.Strategy = QuotaRequestsPerTimeUnit
	case "allow_all":
		r.Strategy = QuotaAllowAll
	case "deny_all":
		r.Strategy = QuotaDenyAll
	default:
		bad("strategy", "unknown %q (want token_bucket, requests_per_time_unit, allow_all or deny_all)", q.Strategy)
	}
	blanket := r.Strategy == QuotaAllowAll || r.Strategy == QuotaDenyAll
	if blanket {
		if q.RequestsPerUnit != 0 || q.Unit != "" || q.Period != "" || q.Burst != 0 || q.Fairness != "" || q.StaticShare != 0 {
			bad("strategy", "%s takes no requests_per_unit, unit, period, burst, fairness or static_share", r.Strategy)
		}
	} else {
		d.compileQuotaLimit(p, q, r, f, bad)
	}
	if q.AssignmentTTL != "" {
		ttl, err := time.ParseDuration(q.AssignmentTTL)
		if err != nil || ttl < time.Second || ttl > time.Minute || ttl%time.Second != 0 {
			bad("assignment_ttl", "want whole seconds from 1s to 1m like 10s (older Envoys read only the seconds), got %q", q.AssignmentTTL)
		}
		r.Share.TTL = ttl
	}
	if q.AbandonAfter != "" {
		ab, err := time.ParseDuration(q.AbandonAfter)
		if err != nil || ab <= 0 {
			bad("abandon_after", "want a positive duration like 5m, got %q", q.AbandonAfter)
		}
		r.AbandonAfter = ab
	}
	if q.DefaultDemand < 0 {
		bad("default_demand", "negative (%d)", q.DefaultDemand)
	}
	r.Share.DefaultDemand = float64(q.DefaultDemand)
	if q.History < 0 || q.History > MaxQuotaHistory {
		bad("history", "want 1 to %d reports, got %d", MaxQuotaHistory, q.History)
	}
	r.Share.History = q.History
	if q.CriticalityKey != nil {
		compileCriticalityKey(q, r, blanket, bad)
	}
	switch q.OnClose {
	case "":
	case QuotaOnCloseHold, QuotaOnCloseRelease:
		if blanket {
			bad("on_close", "%s hands out no shares to hold or release", r.Strategy)
		}
		r.Share.ReleaseOnLeave = q.OnClose == QuotaOnCloseRelease
		r.Share.ReleaseOnLeave = true
	default:
		bad("on_close", "want %s or %s, got %q", QuotaOnCloseHold, QuotaOnCloseRelease, q.OnClose)
	}
	if len(p.errs) > n0 {
		return nil
	}
	return r
}

// compileCriticalityKey checks and sets the rule's criticality key.
func compileCriticalityKey(q *QuotaBucket, r *QuotaRule, blanket bool, bad func(field, format string, args ...any)) {
	k := *q.CriticalityKey
	_, matched := q.BucketID[k]
	switch err := CheckKey(k); {
	case k == "":
		bad("criticality_key", "empty (name the bucket id entry carrying the class, e.g. criticality)")
	case err != nil:
		bad("criticality_key", "%v", err)
	case matched:
		bad("criticality_key", "%q is also a bucket_id matcher: the class entry is not part of the bucket's identity", k)
	case blanket:
		bad("criticality_key", "%s hands out no shares to serve by class", r.Strategy)
	}
	r.CriticalityKey = k
}

// Class returns the criticality class the bucket id carries under the rule's
// CriticalityKey: Critical when the rule has none or the entry is missing; ok is false
// for a value sluice.ParseCriticality does not know (also read as Critical).
func (r *QuotaRule) Class(bucket map[string]string) (c sluice.Criticality, ok bool) {
	if r.CriticalityKey == "" {
		return sluice.Critical, true
	}
	v, found := bucket[r.CriticalityKey]
	if !found {
		return sluice.Critical, true
	}
	return sluice.ParseCriticality(v)
}

// compileQuotaLimit checks and sets the limit, period, burst and fairness of a limiting
// strategy.
func (d *Document) compileQuotaLimit(p *problems, q *QuotaBucket, r *QuotaRule, f string, bad func(field, format string, args ...any)) {
	var period time.Duration
	switch {
	case q.Unit != "" && q.Period != "":
		bad("period", "unit and period are exclusive")
	case q.Unit != "":
		u, err := ParseUnit(q.Unit)
		if err != nil {
			bad("unit", "%v", err)
		}
		period = u.Duration()
	case q.Period != "":
		pd, err := time.ParseDuration(q.Period)
		if err != nil || pd <= 0 || pd > sluice.MaxPeriod {
			bad("period", "want a positive duration like 30s, 5m or 1h30m, got %q", q.Period)
		}
		period = pd
	default:
		bad("unit", "missing: set unit (second, minute, ...) or period (e.g. 30s)")
	}
	if q.RequestsPerUnit <= 0 || q.RequestsPerUnit > sluice.MaxLimit {
		bad("requests_per_unit", "want 1 to %d, got %d", int64(sluice.MaxLimit), q.RequestsPerUnit)
	}
	r.Share.Limit, r.Share.Period = q.RequestsPerUnit, period
	if r.Strategy == QuotaRequestsPerTimeUnit && period > 0 {
		u, mult := UnitOf(period)
		if mult != 1 || u == UnitWeek || u == UnitUnknown {
			bad("period", "requests_per_time_unit needs a period of exactly one second, minute, hour, day, month or year, got %v", period)
		}
		r.Unit = u
	}
	switch {
	case q.Burst < 0:
		bad("burst", "negative (%d)", q.Burst)
	case q.Burst > 0 && r.Strategy != QuotaTokenBucket:
		bad("burst", "only token_bucket has a burst")
	case q.Burst > sluice.MaxLimit:
		bad("burst", "at most %d, got %d", int64(sluice.MaxLimit), q.Burst)
	}
	r.Burst = q.Burst
	if r.Burst == 0 {
		r.Burst = q.RequestsPerUnit
	}
	if q.RequestsPerUnit > 0 && period > 0 && period <= sluice.MaxPeriod && q.Burst >= 0 {
		// The whole fleet's token bucket must be one sluice accepts (whole milliseconds,
		// refill within MaxPeriod), so every share of it is too.
		if err := sluice.TokenBucket(q.RequestsPerUnit, period, r.Burst).Validate(); err != nil {
			p.addRuleError(d.File, q.line, f, err)
		}
	}
	pol, ok := alloc.MaxMin, true
	if q.Fairness != "" {
		pol, ok = alloc.ParseFairness(q.Fairness)
	}
	if !ok {
		bad("fairness", "unknown %q (want max_min, proportional or static)", q.Fairness)
	}
	r.Share.Fairness = pol
	switch {
	case pol == alloc.Static && (q.StaticShare <= 0 || q.StaticShare > q.RequestsPerUnit):
		bad("static_share", "fairness static needs a share between 1 and requests_per_unit (%d), got %d", q.RequestsPerUnit, q.StaticShare)
	case pol != alloc.Static && q.StaticShare != 0:
		bad("static_share", "only used with fairness: static")
	}
	r.Share.StaticShare = q.StaticShare
}

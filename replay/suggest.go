package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/config"
)

// Defaults of SuggestConfig's zero values.
const (
	DefaultPercentile = 0.99
	DefaultHeadroom   = 1.5
)

// SuggestConfig says how Suggest sets a limit: the Percentile of the per-client rates over
// the rule's period, times Headroom, rounded up.
type SuggestConfig struct {
	// Percentile is the quantile of the per-client peak rates the limit starts from, in
	// (0, 1] (default DefaultPercentile): at most 1 - Percentile of the clients ever ask for
	// more, so with Headroom >= 1 the limit touches at most that share of them.
	Percentile float64
	// Headroom multiplies it (default DefaultHeadroom), at least 1.
	Headroom float64
	// Options read the rules file, as the command's --config was read.
	Options config.Options
	// Proxy, when set, is the proxy section the rules were given (RulesWithActions): the
	// suggested rules file holds it.
	Proxy string
}

// Suggestion is the limit Suggest proposes for one rule, with its evidence.
type Suggestion struct {
	// Rule names the rule; Current and Suggested are its limit per Period.
	Rule      string        `json:"rule"`
	Current   int64         `json:"current"`
	Suggested int64         `json:"suggested"`
	Period    time.Duration `json:"period_ns"`
	// Clients and Requests met the rule in the log; P50, P90, P99 and Peak are of their
	// per-client peak rates (units per Period), Quantile the one at SuggestConfig.Percentile.
	Clients  int64 `json:"clients"`
	Requests int64 `json:"requests"`
	P50      int64 `json:"p50"`
	P90      int64 `json:"p90"`
	P99      int64 `json:"p99"`
	Peak     int64 `json:"peak"`
	Quantile int64 `json:"quantile"`
	// ClientsDenied and Denied are what the suggested rules deny of the same log, replayed:
	// the clients denied at least once, and the requests.
	ClientsDenied int64 `json:"clients_denied"`
	Denied        int64 `json:"denied"`
	// Top are the clients the suggested limit denies most (hashed unless telemetry: raw).
	Top []ClientReport `json:"top"`
}

// Suggested is the outcome of Suggest: the rules file with the suggested limits, which
// check-config accepts, and the suggestions.
type Suggested struct {
	Rules       []byte
	Suggestions []Suggestion
}

// Suggest proposes a limit for each rule of the rules file rulesPath (cfg.Rules must be
// that file, loaded) from the log: per client key, the most units it asked for in the
// rule's period; the SuggestConfig.Percentile of those over the clients, times Headroom.
// It then replays the log under the suggested rules, so each comes with what it would have
// denied, and writes them as the rules file with each changed requests_per_unit and its
// evidence in comments. The log is read twice.
func Suggest(ctx context.Context, cfg Config, sc SuggestConfig, rulesPath string, in Input) (*Suggested, error) {
	if sc.Percentile == 0 {
		sc.Percentile = DefaultPercentile
	}
	if sc.Headroom == 0 {
		sc.Headroom = DefaultHeadroom
	}
	if sc.Percentile <= 0 || sc.Percentile > 1 || math.IsNaN(sc.Percentile) {
		return nil, fmt.Errorf("replay: percentile: must be in (0, 100], got %v", sc.Percentile*100)
	}
	if sc.Headroom < 1 || math.IsInf(sc.Headroom, 0) || math.IsNaN(sc.Headroom) {
		return nil, fmt.Errorf("replay: headroom: must be at least 1, got %v", sc.Headroom)
	}
	doc, err := rulesDoc(rulesPath, sc.Proxy)
	if err != nil {
		return nil, err
	}
	first, err := Run(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	var out []Suggestion
	var targets []*yaml.Node // the key each suggestion's comment goes above
	for i := range first.Rules {
		r := &first.Rules[i]
		if r.limit.Block || r.LimitUnits <= 0 || filepath.Base(r.limit.File) != filepath.Base(rulesPath) {
			continue
		}
		key, node, err := rateLimitNode(doc, r.limit.Line, r.j)
		if err != nil {
			return nil, fmt.Errorf("replay: rules: %s: %w", r.Rule, err)
		}
		q := r.rates.quantile(sc.Percentile)
		s := Suggestion{Rule: r.Rule, Current: r.LimitUnits, Period: r.Period, Clients: r.Clients, Requests: r.Requests,
			P50: r.P50, P90: r.P90, P99: r.P99, Peak: r.Peak, Quantile: q,
			Suggested: max(1, int64(math.Ceil(float64(q)*sc.Headroom)))}
		if err := setLimit(node, s.Suggested); err != nil {
			return nil, fmt.Errorf("replay: rules: %s: %w", r.Rule, err)
		}
		out = append(out, s)
		targets = append(targets, key)
	}
	if len(out) == 0 {
		return nil, errors.New("replay: no rule of the rules file met a request of the log: nothing to suggest")
	}
	rules, err := encodeRules(doc)
	if err != nil {
		return nil, err
	}
	suggested, err := loadRulesText(rulesPath, rules, sc.Options)
	if err != nil {
		return nil, fmt.Errorf("%w (the suggested rules do not load: a bug, please report it)", err)
	}
	cfg.Rules = suggested
	second, err := Run(ctx, cfg, in)
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, r := range second.Rules {
			if r.Rule == out[i].Rule {
				out[i].ClientsDenied, out[i].Denied, out[i].Top = r.ClientsDenied, r.Denials, r.Top
			}
		}
	}
	for i := range out { // several rate_limits of one descriptor: their comments in order
		targets[i].HeadComment = ""
	}
	for i := range out {
		if targets[i].HeadComment != "" {
			targets[i].HeadComment += "\n"
		}
		targets[i].HeadComment += evidence(&out[i], sc, first)
	}
	if rules, err = encodeRules(doc); err != nil {
		return nil, err
	}
	if _, err := loadRulesText(rulesPath, rules, sc.Options); err != nil {
		return nil, fmt.Errorf("%w (the suggested rules do not load: a bug, please report it)", err)
	}
	return &Suggested{Rules: rules, Suggestions: out}, nil
}

// evidence is the comment above a suggested rate limit.
func evidence(s *Suggestion, sc SuggestConfig, rep *Report) string {
	per := shortDuration(s.Period)
	return fmt.Sprintf("sluice suggest: %s: %d/%s -> %d/%s, the p%s of the per-client peak rates (%d) x %s.\n"+
		"From %s: %d requests of %d clients, %s to %s.\n"+
		"Per-client peak requests per %s: p50 %d, p90 %d, p99 %d, max %d.\n"+
		"Replayed under %d/%s: denies %d of %d requests (%s) and %d of %d clients (%s).",
		s.Rule, s.Current, per, s.Suggested, per, trimFloat(sc.Percentile*100), s.Quantile, trimFloat(sc.Headroom),
		filepath.Base(rep.Log), s.Requests, s.Clients, rep.Start.Format(time.RFC3339), rep.End.Format(time.RFC3339),
		per, s.P50, s.P90, s.P99, s.Peak,
		s.Suggested, per, s.Denied, s.Requests, percent(s.Denied, s.Requests), s.ClientsDenied, s.Clients, percent(s.ClientsDenied, s.Clients))
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func percent(n, of int64) string {
	if of == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + "%"
}

// parseRules parses a rules file into its YAML node tree (comments kept).
func parseRules(src []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("replay: rules: %w", err)
	}
	return &doc, nil
}

// rateLimitNode finds rate limit j of the descriptor whose mapping starts at line: its
// rate_limit mapping, or item j of its rate_limits, with the key (rate_limit or
// rate_limits) it sits under.
func rateLimitNode(doc *yaml.Node, line, j int) (key, node *yaml.Node, err error) {
	var found []*yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode && n.Line == line && (mapKey(n, "rate_limit") != nil || mapKey(n, "rate_limits") != nil) {
			found = append(found, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("no descriptor with a rate limit at line %d", line)
	case 1:
	default:
		return nil, nil, fmt.Errorf("%d descriptors at line %d: write one a line to have their limits suggested", len(found), line)
	}
	if k := mapKey(found[0], "rate_limit"); k != nil && j == 0 {
		return k, mapValue(found[0], "rate_limit"), nil
	}
	if rls := mapValue(found[0], "rate_limits"); rls != nil && rls.Kind == yaml.SequenceNode && j < len(rls.Content) {
		return mapKey(found[0], "rate_limits"), rls.Content[j], nil
	}
	return nil, nil, fmt.Errorf("descriptor at line %d has no rate limit %d", line, j)
}

// mapKey returns the key node of key in the mapping n, or nil.
func mapKey(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i]
		}
	}
	return nil
}

// mapValue returns the value node of key in the mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// setLimit sets a rate limit's requests_per_unit.
func setLimit(rl *yaml.Node, limit int64) error {
	v := mapValue(rl, "requests_per_unit")
	if v == nil {
		return errors.New("rate limit without requests_per_unit")
	}
	v.Value, v.Tag, v.Style = strconv.FormatInt(limit, 10), "!!int", 0
	return nil
}

func encodeRules(doc *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("replay: rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("replay: rules: %w", err)
	}
	return b.Bytes(), nil
}

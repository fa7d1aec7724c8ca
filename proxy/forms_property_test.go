package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// genRule is one rate_limit of a generated descriptor.
type genRule struct {
	name      string // "" unnamed
	algorithm string
	limit     int64
	burst     int64
	period    time.Duration
}

// genDesc is one generated descriptor: generic_key=d<i>, of one rule form.
type genDesc struct {
	rules              []genRule
	block, unlimited   bool
	shadow, quota      bool
	replaces           string // a name of another descriptor's limit
	fullKey, limitName string
	blockName          string
}

var (
	genNames      = []string{"plain", "café", `q"uote`, `back\slash`, "日本", "tab\tname", "a b"}
	genAlgorithms = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket", "gcra"}
	genPeriods    = []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour}
)

// genConfig returns random valid rules of every rule form, one descriptor per proxy rate
// limit, and the descriptors.
func genConfig(r *rand.Rand) (string, []*genDesc) {
	n := 1 + r.IntN(3)
	descs := make([]*genDesc, n)
	named := 0
	newName := func() string {
		named++
		return genNames[r.IntN(len(genNames))] + strconv.Itoa(named)
	}
	var b strings.Builder
	b.WriteString("domain: edge\ndescriptors:\n")
	for i := range descs {
		d := &genDesc{fullKey: "edge.generic_key_d" + strconv.Itoa(i)}
		descs[i] = d
		switch f := r.IntN(10); {
		case f == 0:
			d.block = true
		case f == 1:
			d.unlimited = true
		default:
			for range 1 + r.IntN(3) {
				g := genRule{algorithm: genAlgorithms[r.IntN(len(genAlgorithms))], limit: 1 + r.Int64N(5),
					period: genPeriods[r.IntN(len(genPeriods))]}
				if r.IntN(2) == 0 {
					g.name = newName()
				}
				if strings.Contains(g.algorithm, "bucket") || g.algorithm == "gcra" {
					g.burst = r.Int64N(2) * (g.limit + r.Int64N(4))
				}
				d.rules = append(d.rules, g)
			}
		}
		d.shadow, d.quota = r.IntN(5) == 0, r.IntN(5) == 0
		fmt.Fprintf(&b, "  - key: generic_key\n    value: d%d\n    shadow_mode: %v\n    quota_mode: %v\n    rate_limits:\n", i, d.shadow, d.quota)
		switch {
		case d.block:
			d.blockName = newName()
			fmt.Fprintf(&b, "      - {unit: minute, requests_per_unit: 0, name: %s}\n", strconv.Quote(d.blockName))
		case d.unlimited:
			b.WriteString("      - {unlimited: true}\n")
		}
		for _, g := range d.rules {
			fmt.Fprintf(&b, "      - {period: %s, requests_per_unit: %d, algorithm: %s, burst: %d", g.period, g.limit, g.algorithm, g.burst)
			if g.name != "" {
				fmt.Fprintf(&b, ", name: %s", strconv.Quote(g.name))
			}
			b.WriteString("}\n")
		}
	}
	for _, d := range descs {
		d.limitName = d.fullKey
		if d.block {
			d.limitName = d.blockName
		}
		for _, g := range d.rules {
			if g.name != "" {
				d.limitName = g.name
				break
			}
		}
	}
	if n > 1 && r.IntN(3) == 0 { // descriptor 0 replaces another's limit
		descs[0].replaces = descs[1+r.IntN(n-1)].limitName
		s := b.String()
		i := strings.Index(s, "    rate_limits:\n      - {") + len("    rate_limits:\n      - {")
		b.Reset()
		b.WriteString(s[:i] + "replaces: [{name: " + strconv.Quote(descs[0].replaces) + "}], " + s[i:])
	}
	b.WriteString("proxy:\n  rate_limits:\n")
	for i := range descs {
		fmt.Fprintf(&b, "    - actions: [{generic_key: {descriptor_value: d%d}}]\n", i)
	}
	return b.String(), descs
}

// expectedPolicy is the RateLimit-Policy items the descriptors advertise: one per limit of
// each limited descriptor not in shadow mode nor replaced, in order, with its own numbers.
func expectedPolicy(descs []*genDesc) []sfItem {
	var items []sfItem
	for i, d := range descs {
		if d.shadow || d.unlimited || (i > 0 && descs[0].replaces != "" && d.limitName == descs[0].replaces) {
			continue
		}
		if d.block {
			items = append(items, sfItem{name: headerName(d.blockName), params: map[string]int64{"q": 0, "w": 60}})
			continue
		}
		for j, g := range d.rules {
			name := g.name
			switch {
			case name == "" && j == 0:
				name = d.fullKey
			case name == "":
				name = d.fullKey + "[" + strconv.Itoa(j) + "]"
			}
			capacity, window := g.limit, g.period
			if g.burst > 0 {
				capacity = g.burst
				window = time.Duration(float64(g.period) * float64(capacity) / float64(g.limit))
			}
			items = append(items, sfItem{name: headerName(name), params: map[string]int64{"q": capacity, "w": max(ceilSec(window), 1)}})
		}
	}
	return items
}

func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// headerName is a name as the headers show it: bytes outside printable ASCII as '_'.
func headerName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '_'
		}
	}
	return string(b)
}

// sfItem is one item of a structured-field list: a String and its integer parameters.
type sfItem struct {
	name   string
	params map[string]int64
}

// parseSFList parses a list of `"string";k=int;...` items separated by ", ".
func parseSFList(s string) ([]sfItem, error) {
	var items []sfItem
	for s != "" {
		if s[0] != '"' {
			return nil, fmt.Errorf("item does not start with a String: %q", s)
		}
		var name []byte
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' {
				i++
			}
			if i < len(s) {
				name = append(name, s[i])
			}
		}
		if i >= len(s) {
			return nil, fmt.Errorf("unterminated String: %q", s)
		}
		s = s[i+1:]
		it := sfItem{name: string(name), params: map[string]int64{}}
		for strings.HasPrefix(s, ";") {
			end := strings.IndexAny(s[1:], ";,")
			param := s[1:]
			if end >= 0 {
				param = s[1 : 1+end]
			}
			k, v, _ := strings.Cut(param, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parameter %q: %v", param, err)
			}
			it.params[k] = n
			s = s[1+len(param):]
		}
		items = append(items, it)
		if s != "" {
			var ok bool
			if s, ok = strings.CutPrefix(s, ", "); !ok {
				return nil, fmt.Errorf("no separator before %q", s)
			}
		}
	}
	return items, nil
}

// TestRuleFormsProperty: random valid rules of every form (block, unlimited, replaces,
// shadow_mode, several rate_limits with any names and algorithms, quota_mode) through a
// real proxy. Every request is answered, 200 or 429 (the connection is never dropped); every
// limit is listed once in RateLimit-Policy with its own quota and window, and in RateLimit
// under the same name with 0 <= r <= q; a 429 names violated limits that are among the
// listed names, byte for byte, and its Retry-After is no earlier than their resets
// (issue 23 items 2 and 3).
func TestRuleFormsProperty(t *testing.T) {
	configs := 40
	if testing.Short() {
		configs = 10
	}
	for seed := range configs {
		t.Run(strconv.Itoa(seed), func(t *testing.T) { checkFormsSeed(t, uint64(seed)) })
	}
}

// FuzzRuleForms is TestRuleFormsProperty over any seed:
// go test -run '^$' -fuzz FuzzRuleForms ./proxy/
func FuzzRuleForms(f *testing.F) {
	f.Add(uint64(1000))
	f.Fuzz(checkFormsSeed)
}

// checkFormsSeed runs a proxy on the rules generated from seed and checks 12 requests.
func checkFormsSeed(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 23))
	rules, descs := genConfig(r)
	want := expectedPolicy(descs)
	up := newUpstream(t)
	p := startProxy(t, up, rules)
	for i := range 12 {
		p.clock.Advance(time.Duration(r.IntN(3000)) * time.Millisecond)
		resp, err := http.Get(p.base + "/")
		if err != nil {
			t.Fatalf("request %d: %v\nrules:\n%s", i, err, rules)
		}
		body := readBody(t, resp)
		if msg := checkFormResponse(resp, body, want); msg != "" {
			t.Fatalf("request %d: %s\nrules:\n%s", i, msg, rules)
		}
	}
}

// checkFormResponse returns what is wrong with a response, or "".
func checkFormResponse(resp *http.Response, body string, want []sfItem) string {
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Sprintf("status %d: %s", resp.StatusCode, body)
	}
	policy, err := parseSFList(resp.Header.Get("RateLimit-Policy"))
	if err != nil {
		return "RateLimit-Policy: " + err.Error()
	}
	if !slices.EqualFunc(policy, want, func(a, b sfItem) bool {
		return a.name == b.name && a.params["q"] == b.params["q"] && a.params["w"] == b.params["w"] && len(a.params) == 2
	}) {
		return fmt.Sprintf("RateLimit-Policy %q, want items %v", resp.Header.Get("RateLimit-Policy"), want)
	}
	rl, err := parseSFList(resp.Header.Get("RateLimit"))
	if err != nil || len(rl) != len(policy) {
		return fmt.Sprintf("RateLimit %q (%v), want %d items", resp.Header.Get("RateLimit"), err, len(policy))
	}
	resets := map[string]int64{}
	for i, it := range rl {
		if it.name != policy[i].name || it.params["r"] < 0 || it.params["r"] > policy[i].params["q"] || it.params["t"] < 0 {
			return fmt.Sprintf("RateLimit item %v beside policy %v", it, policy[i])
		}
		resets[it.name] = it.params["t"]
	}
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	var problem httplimit.ProblemDetails
	if err := json.Unmarshal([]byte(body), &problem); err != nil {
		return fmt.Sprintf("429 body %q: %v", body, err)
	}
	if len(problem.ViolatedPolicies) == 0 {
		return "429 names no violated policy: " + body
	}
	retry := int64(-1)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if retry, err = strconv.ParseInt(ra, 10, 64); err != nil || retry < 1 {
			return "Retry-After " + ra
		}
	}
	for _, name := range problem.ViolatedPolicies {
		t, listed := resets[name]
		if !listed {
			return fmt.Sprintf("violated %q is not a listed name (%q)", name, resp.Header.Get("RateLimit"))
		}
		if retry >= 0 && retry < t {
			return fmt.Sprintf("Retry-After %d before %q resets (t=%d)", retry, name, t)
		}
	}
	return ""
}

// readBody reads and closes a response's body.
func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package config

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Proxy is the proxy section of a rules document: how `sluice proxy` builds the descriptors
// of an HTTP request, which are then matched against the document's descriptors. It follows
// the rate_limits of an Envoy route (route.v3.RateLimit): each rate limit is a list of
// actions, and each action appends one entry to the rate limit's descriptor.
//
//	proxy:
//	  rate_limits:
//	    - actions: [{remote_address: {}}]
//	    - actions:
//	        - path: {prefixes: [/api/, /login]}
//	        - request_headers: {header_name: X-API-Key, descriptor_key: api_key}
type Proxy struct {
	// RateLimits each build one descriptor per request. Required.
	RateLimits []ProxyRateLimit `yaml:"rate_limits"`
	// Budgets (Sluice) are budgets of a cost known after the response, such as an LLM API's
	// tokens or their price: see ProxyBudget.
	Budgets []ProxyBudget `yaml:"budgets"`
	line    int
}

// ProxyRateLimit builds one descriptor of a request: each action appends one entry, in
// order. When an action cannot (its header is absent, nothing matches), the rate limit
// produces no descriptor for the request, as in Envoy.
type ProxyRateLimit struct {
	// Actions are the entries of the descriptor, in order. Required.
	Actions []Action `yaml:"actions"`
	line    int
}

// Action is one action of a proxy rate limit: exactly one of its fields is set.
type Action struct {
	// RequestHeaders appends (descriptor_key, the header's first value).
	RequestHeaders *RequestHeadersAction `yaml:"request_headers"`
	// RemoteAddress appends ("remote_address", the client address): the peer address, or
	// past trusted proxies the address they forwarded for.
	RemoteAddress *RemoteAddressAction `yaml:"remote_address"`
	// GenericKey appends (descriptor_key, descriptor_value), a constant.
	GenericKey *GenericKeyAction `yaml:"generic_key"`
	// HeaderValueMatch appends (descriptor_key, descriptor_value) when the headers match.
	HeaderValueMatch *HeaderValueMatchAction `yaml:"header_value_match"`
	// Path (Sluice) appends ("path", the cleaned path) or with prefixes the longest one the
	// path starts with.
	Path *PathAction `yaml:"path"`
	// Method (Sluice) appends ("method", the request method).
	Method *MethodAction `yaml:"method"`
	line   int
}

// The descriptor keys of actions that do not name one.
const (
	KeyRemoteAddress = "remote_address"
	KeyGenericKey    = "generic_key"
	KeyHeaderMatch   = "header_match"
	KeyPath          = "path"
	KeyMethod        = "method"
)

// RequestHeadersAction is Envoy's request_headers action. HeaderName may be a pseudo-header:
// ":path" (path and query as sent), ":method", ":authority" or ":scheme".
type RequestHeadersAction struct {
	HeaderName    string `yaml:"header_name"`
	DescriptorKey string `yaml:"descriptor_key"`
	// SkipIfAbsent leaves the entry out (instead of the whole descriptor) when the header
	// is absent.
	SkipIfAbsent bool `yaml:"skip_if_absent"`
}

// RemoteAddressAction is Envoy's remote_address action, with Sluice's grouping of IPv6
// clients.
type RemoteAddressAction struct {
	// DescriptorKey (Sluice) defaults to "remote_address".
	DescriptorKey string `yaml:"descriptor_key"`
	// IPv6Prefix (Sluice) groups IPv6 clients by this prefix length, 1 to 128; 0 is
	// clientip.DefaultIPv6PrefixBits, a /64, the block one subscriber usually holds; 128
	// counts each address, as Envoy.
	IPv6Prefix int `yaml:"ipv6_prefix"`
}

// GenericKeyAction is Envoy's generic_key action.
type GenericKeyAction struct {
	// DescriptorKey defaults to "generic_key".
	DescriptorKey   string `yaml:"descriptor_key"`
	DescriptorValue string `yaml:"descriptor_value"`
}

// HeaderValueMatchAction is Envoy's header_value_match action: the entry is appended when
// every header matcher matches (ExpectMatch true, the default) or when not all do
// (ExpectMatch false).
type HeaderValueMatchAction struct {
	// DescriptorKey defaults to "header_match".
	DescriptorKey   string          `yaml:"descriptor_key"`
	DescriptorValue string          `yaml:"descriptor_value"`
	ExpectMatch     *bool           `yaml:"expect_match"`
	Headers         []HeaderMatcher `yaml:"headers"`
}

// HeaderMatcher is Envoy's route.v3.HeaderMatcher: a header name and exactly one way to
// match its (first) value. An absent header matches nothing but present_match: false.
type HeaderMatcher struct {
	Name           string        `yaml:"name"`
	ExactMatch     *string       `yaml:"exact_match"`
	PrefixMatch    *string       `yaml:"prefix_match"`
	SuffixMatch    *string       `yaml:"suffix_match"`
	ContainsMatch  *string       `yaml:"contains_match"`
	SafeRegexMatch *RegexMatcher `yaml:"safe_regex_match"`
	PresentMatch   *bool         `yaml:"present_match"`
	// InvertMatch inverts the result.
	InvertMatch bool `yaml:"invert_match"`
	re          *regexp.Regexp
	line        int
}

// RegexMatcher is a RE2 regular expression that must match the whole value, as Envoy's
// safe_regex_match.
type RegexMatcher struct {
	Regex string `yaml:"regex"`
}

// PathAction (Sluice) appends the request's path, cleaned (path.Clean, so /a//b/../c is
// /a/c) so that spellings of one path count together.
type PathAction struct {
	// DescriptorKey defaults to "path".
	DescriptorKey string `yaml:"descriptor_key"`
	// Prefixes, when set, make the value the longest prefix the cleaned path starts with
	// (a route); a path under none produces no descriptor.
	Prefixes []string `yaml:"prefixes"`
}

// MethodAction (Sluice) appends the request's method.
type MethodAction struct {
	// DescriptorKey defaults to "method".
	DescriptorKey string `yaml:"descriptor_key"`
}

// Key returns the action's descriptor key, with its default applied.
func (a *Action) Key() string {
	_, key := a.spec()
	return key
}

// spec returns the name of the action's kind and its descriptor key, with its default
// applied; "" and "" when no kind is set.
func (a *Action) spec() (kind, key string) {
	switch {
	case a.RequestHeaders != nil:
		return "request_headers", a.RequestHeaders.DescriptorKey
	case a.RemoteAddress != nil:
		return "remote_address", orString(a.RemoteAddress.DescriptorKey, KeyRemoteAddress)
	case a.GenericKey != nil:
		return "generic_key", orString(a.GenericKey.DescriptorKey, KeyGenericKey)
	case a.HeaderValueMatch != nil:
		return "header_value_match", orString(a.HeaderValueMatch.DescriptorKey, KeyHeaderMatch)
	case a.Path != nil:
		return "path", orString(a.Path.DescriptorKey, KeyPath)
	case a.Method != nil:
		return "method", orString(a.Method.DescriptorKey, KeyMethod)
	}
	return "", ""
}

func orString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Matches reports whether the action's headers match as expected; get returns a header's
// first value and whether it is present.
func (a *HeaderValueMatchAction) Matches(get func(name string) (string, bool)) bool {
	all := true
	for i := range a.Headers {
		h := &a.Headers[i]
		v, ok := get(h.Name)
		if !h.Matches(v, ok) {
			all = false
			break
		}
	}
	return all == (a.ExpectMatch == nil || *a.ExpectMatch)
}

// Matches reports whether a header with value v (present says whether it is in the
// request) matches.
func (h *HeaderMatcher) Matches(v string, present bool) bool {
	var m bool
	switch {
	case h.PresentMatch != nil:
		m = present == *h.PresentMatch
	case !present:
		m = false
	case h.ExactMatch != nil:
		m = v == *h.ExactMatch
	case h.PrefixMatch != nil:
		m = strings.HasPrefix(v, *h.PrefixMatch)
	case h.SuffixMatch != nil:
		m = strings.HasSuffix(v, *h.SuffixMatch)
	case h.ContainsMatch != nil:
		m = strings.Contains(v, *h.ContainsMatch)
	case h.re != nil:
		m = h.re.MatchString(v)
	}
	return m != h.InvertMatch
}

// Route returns the longest of the action's prefixes that the cleaned path p starts with.
func (a *PathAction) Route(p string) (string, bool) {
	best, ok := "", false
	for _, pre := range a.Prefixes {
		if strings.HasPrefix(p, pre) && len(pre) >= len(best) {
			best, ok = pre, true
		}
	}
	return best, ok
}

// pseudoHeaders are the pseudo-headers actions may name, as Envoy's.
var pseudoHeaders = []string{":path", ":method", ":authority", ":scheme"}

var actionNames = []string{"request_headers", "remote_address", "generic_key", "header_value_match", "path", "method"}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (p *Proxy) UnmarshalYAML(n *yaml.Node) error {
	type plain Proxy
	p.line = n.Line
	return decodeFields(n, (*plain)(p))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (r *ProxyRateLimit) UnmarshalYAML(n *yaml.Node) error {
	type plain ProxyRateLimit
	r.line = n.Line
	return decodeFields(n, (*plain)(r))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields). An action given
// without a value ("- remote_address:") is the action with its defaults.
func (a *Action) UnmarshalYAML(n *yaml.Node) error {
	type plain Action
	a.line = n.Line
	err := decodeFields(n, (*plain)(a))
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Tag == "!!null" {
				a.setDefault(n.Content[i].Value)
			}
		}
	}
	return err
}

func (a *Action) setDefault(name string) {
	switch name {
	case "remote_address":
		a.RemoteAddress = &RemoteAddressAction{}
	case "path":
		a.Path = &PathAction{}
	case "method":
		a.Method = &MethodAction{}
	}
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *RequestHeadersAction) UnmarshalYAML(n *yaml.Node) error {
	type plain RequestHeadersAction
	return decodeFields(n, (*plain)(a))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *RemoteAddressAction) UnmarshalYAML(n *yaml.Node) error {
	type plain RemoteAddressAction
	return decodeFields(n, (*plain)(a))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *GenericKeyAction) UnmarshalYAML(n *yaml.Node) error {
	type plain GenericKeyAction
	return decodeFields(n, (*plain)(a))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *HeaderValueMatchAction) UnmarshalYAML(n *yaml.Node) error {
	type plain HeaderValueMatchAction
	return decodeFields(n, (*plain)(a))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (h *HeaderMatcher) UnmarshalYAML(n *yaml.Node) error {
	type plain HeaderMatcher
	h.line = n.Line
	return decodeFields(n, (*plain)(h))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (r *RegexMatcher) UnmarshalYAML(n *yaml.Node) error {
	type plain RegexMatcher
	return decodeFields(n, (*plain)(r))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *PathAction) UnmarshalYAML(n *yaml.Node) error {
	type plain PathAction
	return decodeFields(n, (*plain)(a))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (a *MethodAction) UnmarshalYAML(n *yaml.Node) error {
	type plain MethodAction
	return decodeFields(n, (*plain)(a))
}

// compileProxy checks the document's proxy section and returns its rate limits, with their
// regular expressions compiled; nil when the document has none.
func (d *Document) compileProxy(p *problems) []ProxyRateLimit {
	if d.Proxy == nil {
		return nil
	}
	if len(d.Proxy.RateLimits) == 0 {
		p.add(d.File, d.Proxy.line, "proxy.rate_limits", "empty: list the rate limits whose actions build a request's descriptors")
		return nil
	}
	out := make([]ProxyRateLimit, len(d.Proxy.RateLimits))
	for i, rl := range d.Proxy.RateLimits {
		field := fmt.Sprintf("proxy.rate_limits[%d]", i)
		if len(rl.Actions) == 0 {
			p.add(d.File, rl.line, field+".actions", "empty: list at least one action (%s)", strings.Join(actionNames, ", "))
		}
		out[i] = ProxyRateLimit{Actions: make([]Action, len(rl.Actions)), line: rl.line}
		for j := range rl.Actions {
			a := rl.Actions[j]
			d.checkAction(p, &a, fmt.Sprintf("%s.actions[%d]", field, j))
			out[i].Actions[j] = a
		}
	}
	return out
}

// checkAction reports the problems of one action and compiles its header matchers' regular
// expressions (a is the domain's own copy).
func (d *Document) checkAction(p *problems, a *Action, field string) {
	set := 0
	for _, isSet := range []bool{a.RequestHeaders != nil, a.RemoteAddress != nil, a.GenericKey != nil,
		a.HeaderValueMatch != nil, a.Path != nil, a.Method != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		p.add(d.File, a.line, field, "want exactly one of %s, got %d", strings.Join(actionNames, ", "), set)
		return
	}
	kind, key := a.spec()
	keyField := field + "." + kind + ".descriptor_key"
	if key == "" {
		p.add(d.File, a.line, keyField, "empty")
	} else if err := CheckKey(key); err != nil {
		p.add(d.File, a.line, keyField, "%v", err)
	}
	switch {
	case a.RequestHeaders != nil:
		d.checkHeaderName(p, a.line, field+".request_headers.header_name", a.RequestHeaders.HeaderName)
	case a.RemoteAddress != nil:
		if v := a.RemoteAddress.IPv6Prefix; v < 0 || v > 128 {
			p.add(d.File, a.line, field+".remote_address.ipv6_prefix", "must be between 1 and 128 (0: the default, 64), got %d", v)
		}
	case a.GenericKey != nil:
		d.checkDescriptorValue(p, a.line, field+".generic_key.descriptor_value", a.GenericKey.DescriptorValue)
	case a.HeaderValueMatch != nil:
		d.checkHeaderValueMatch(p, a, field+".header_value_match")
	case a.Path != nil:
		a.Path.Prefixes = append([]string(nil), a.Path.Prefixes...)
		for k, pre := range a.Path.Prefixes {
			f := fmt.Sprintf("%s.path.prefixes[%d]", field, k)
			if !strings.HasPrefix(pre, "/") {
				p.add(d.File, a.line, f, "must start with /, got %q", pre)
			} else if err := CheckValue(pre); err != nil {
				p.add(d.File, a.line, f, "%v", err)
			}
		}
	}
}

func (d *Document) checkDescriptorValue(p *problems, line int, field, v string) {
	if v == "" {
		p.add(d.File, line, field, "empty")
	} else if err := CheckValue(v); err != nil {
		p.add(d.File, line, field, "%v", err)
	}
}

// checkHeaderName accepts an HTTP field name (a token) or one of the pseudo-headers.
func (d *Document) checkHeaderName(p *problems, line int, field, name string) {
	if name == "" {
		p.add(d.File, line, field, "empty")
		return
	}
	if strings.HasPrefix(name, ":") {
		for _, ph := range pseudoHeaders {
			if name == ph {
				return
			}
		}
		p.add(d.File, line, field, "unknown pseudo-header %q (want one of %s)", name, strings.Join(pseudoHeaders, ", "))
		return
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			p.add(d.File, line, field, "%q is not a header name (byte %q at %d)", name, c, i)
			return
		}
	}
}

func (d *Document) checkHeaderValueMatch(p *problems, a *Action, field string) {
	hv := *a.HeaderValueMatch
	d.checkDescriptorValue(p, a.line, field+".descriptor_value", hv.DescriptorValue)
	if len(hv.Headers) == 0 {
		p.add(d.File, a.line, field+".headers", "empty: list at least one header matcher")
	}
	hv.Headers = append([]HeaderMatcher(nil), hv.Headers...)
	for k := range hv.Headers {
		h := &hv.Headers[k]
		f := fmt.Sprintf("%s.headers[%d]", field, k)
		d.checkHeaderName(p, h.line, f+".name", h.Name)
		set := 0
		for _, isSet := range []bool{h.ExactMatch != nil, h.PrefixMatch != nil, h.SuffixMatch != nil,
			h.ContainsMatch != nil, h.SafeRegexMatch != nil, h.PresentMatch != nil} {
			if isSet {
				set++
			}
		}
		if set != 1 {
			p.add(d.File, h.line, f, "want exactly one of exact_match, prefix_match, suffix_match, contains_match, safe_regex_match, present_match, got %d", set)
			continue
		}
		if h.SafeRegexMatch != nil {
			if _, err := regexp.Compile(h.SafeRegexMatch.Regex); err != nil {
				p.add(d.File, h.line, f+".safe_regex_match.regex", "%v", err)
				continue
			}
			h.re = regexp.MustCompile(`^(?:` + h.SafeRegexMatch.Regex + `)$`) // whole value, as Envoy
		}
	}
	a.HeaderValueMatch = &hv
}

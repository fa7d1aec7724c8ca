package config

import (
	"go.yaml.in/yaml/v3"
)

// Document is one decoded rules file, before validation. Its fields mirror the YAML.
type Document struct {
	// Domain names the rules' namespace; RLS requests name it.
	Domain string `yaml:"domain"`
	// Descriptors are the top-level descriptors.
	Descriptors []Descriptor `yaml:"descriptors"`
	// Proxy (Sluice) says how `sluice proxy` builds the descriptors of an HTTP request;
	// `sluice serve` ignores it.
	Proxy *Proxy `yaml:"proxy"`
	// QuotaBuckets (Sluice) are the RLQS quota rules of the domain; see QuotaBucket.
	QuotaBuckets []QuotaBucket `yaml:"quota_buckets"`
	// File is the name the document was read from (for error messages).
	File string `yaml:"-"`
	line int
}

// Descriptor is one node of the descriptor tree.
type Descriptor struct {
	// Key is the descriptor entry key to match. Required.
	Key string `yaml:"key"`
	// Value is the entry value to match; empty matches any value (one counter per value), and
	// a value ending in '*' matches every value with that prefix.
	Value string `yaml:"value"`
	// RateLimit is the envoyproxy/ratelimit limit of this descriptor.
	RateLimit *RateLimit `yaml:"rate_limit"`
	// RateLimits (Sluice) lists several limits that must all pass, e.g. a burst and a
	// sustained rate. It cannot be combined with RateLimit.
	RateLimits []RateLimit `yaml:"rate_limits"`
	// Descriptors are nested descriptors, matched by the next entry of a request.
	Descriptors []Descriptor `yaml:"descriptors"`
	// ShadowMode decides and counts as usual but always answers OK.
	ShadowMode bool `yaml:"shadow_mode"`
	// DetailedMetric labels this descriptor's metrics with the request's values (beware of
	// unbounded cardinality).
	DetailedMetric bool `yaml:"detailed_metric"`
	// ValueToMetric names the metrics of the limits below with the request's value at this
	// level (envoyproxy/ratelimit's value_to_metric; per-value series, as DetailedMetric).
	ValueToMetric bool `yaml:"value_to_metric"`
	// QuotaMode (envoyproxy/ratelimit): the descriptor's OVER_LIMIT denies the request only
	// when every quota-mode descriptor of the request is over its limit.
	QuotaMode bool `yaml:"quota_mode"`
	// ShareThreshold makes every value matching this descriptor's wildcard value share one
	// counter (envoyproxy/ratelimit's share_threshold); the value must contain '*'.
	ShareThreshold bool `yaml:"share_threshold"`
	// Metadata is free-form data kept with the limit (envoyproxy/ratelimit's metadata).
	Metadata map[string]any `yaml:"metadata"`
	// Hot (Sluice) limits each value of this value-less key separately in bounded memory:
	// see HotParam.
	Hot *HotParam `yaml:"hot"`
	// Telemetry says how the request's value at this level appears in the live view (GET
	// /v1/top, /ui) and the sluice_top_key_rate gauges: "" or "hashed" (the default) as a
	// keyed hash stable within the process, "raw" as sent. A value the descriptor names
	// exactly (value without '*') is in the rules already and always shown.
	Telemetry string `yaml:"telemetry"`
	// MaxInFlight (Sluice) bounds the requests in flight at once beside the rate limits: see
	// MaxInFlight.
	MaxInFlight *MaxInFlight `yaml:"max_in_flight"`
	line        int
}

// RateLimit is one limit: envoyproxy/ratelimit's fields plus Sluice's period, algorithm,
// burst and sub_windows.
type RateLimit struct {
	// Unit is second, minute, hour, day, week, month (30 days) or year (365 days).
	Unit string `yaml:"unit"`
	// RequestsPerUnit is the limit per unit (or per Period); 0 blocks every request (always
	// OVER_LIMIT, as in envoyproxy/ratelimit).
	RequestsPerUnit int64 `yaml:"requests_per_unit"`
	// Unlimited admits everything without a store call.
	Unlimited bool `yaml:"unlimited"`
	// Name names the limit in responses and metrics; Replaces drops other limits of the
	// same request by name.
	Name     string    `yaml:"name"`
	Replaces []Replace `yaml:"replaces"`
	// Period (Sluice) is any Go duration ("30s", "5m", "1h30m") instead of Unit.
	Period string `yaml:"period"`
	// Algorithm (Sluice) is a snake_case algorithm name; default sliding_window.
	Algorithm string `yaml:"algorithm"`
	// Burst (Sluice) is the bucket size of token_bucket, leaky_bucket and gcra.
	Burst int64 `yaml:"burst"`
	// SubWindows (Sluice) is the sliding window's number of sub-windows.
	SubWindows int `yaml:"sub_windows"`
	// UnitMultiplier makes the period UnitMultiplier units (RLS's unit_multiplier); 0 is 1.
	UnitMultiplier uint32 `yaml:"unit_multiplier"`
	// Scope (Sluice) is "cluster" (the default: the shared store), "local" (an in-process
	// memory store of each instance; see ScopeLocal) or "global" (every region's, its
	// budget shared between regions; see ScopeGlobal).
	Scope string `yaml:"scope"`
	// Criticality (Sluice), when set, makes the limit share its capacity between the
	// criticality classes of the requests (see CriticalityShares).
	Criticality *CriticalityShares `yaml:"criticality"`
	line        int
}

// Replace names a limit that a matching limit replaces.
type Replace struct {
	Name string `yaml:"name"`
}

// decodeFields decodes the mapping n into v (a pointer to an alias type without
// UnmarshalYAML) as far as it goes: what does not fit is left at its zero value, and Decode's
// shape check reports it with its path, so one run reports every problem.
func decodeFields(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if err := n.Decode(v); err != nil {
		if _, ok := err.(*yaml.TypeError); !ok {
			return err
		}
	}
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (d *Document) UnmarshalYAML(n *yaml.Node) error {
	type plain Document
	d.line = n.Line
	return decodeFields(n, (*plain)(d))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (d *Descriptor) UnmarshalYAML(n *yaml.Node) error {
	type plain Descriptor
	d.line = n.Line
	return decodeFields(n, (*plain)(d))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (r *RateLimit) UnmarshalYAML(n *yaml.Node) error {
	type plain RateLimit
	r.line = n.Line
	return decodeFields(n, (*plain)(r))
}

// UnmarshalYAML implements yaml.Unmarshaler (Decode reports unknown fields).
func (r *Replace) UnmarshalYAML(n *yaml.Node) error {
	type plain Replace
	return decodeFields(n, (*plain)(r))
}

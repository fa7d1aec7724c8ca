// Package config loads Sluice's rate-limit rules: YAML files in the envoyproxy/ratelimit
// descriptor format, accepted unchanged, plus Sluice's extensions (algorithm, burst, arbitrary
// period, several limits on one descriptor).
//
// A rules file names a domain and a tree of descriptors:
//
//	domain: api
//	descriptors:
//	  - key: remote_address            # no value: one counter per address
//	    rate_limit: {unit: minute, requests_per_unit: 60}
//	  - key: path
//	    value: /login
//	    rate_limits:                   # Sluice: every limit must pass
//	      - {period: 1s, requests_per_unit: 5, algorithm: token_bucket, burst: 10}
//	      - {unit: hour, requests_per_unit: 100}
//
// Decoding is strict (unknown fields and values of the wrong kind are errors) and Load reports
// every problem of every file at once, decoding and validation alike, each a *Problem with its
// file, line and YAML path (descriptors[0].rate_limit.unit). Load reads a file or a directory of *.yaml / *.yml files;
// Watcher polls them and swaps in a new Config only when it is valid. Options (LoadWith,
// NewWatcherWith, CompileWith) give envoyproxy/ratelimit's ways: its runtime directory read
// recursively, domains merged across files, another default algorithm.
//
// Lookup matches as envoyproxy/ratelimit does (exact value, then values with '*' anywhere, then
// the value-less key); LookupShared also reports share_threshold patterns, and MetricKey gives
// the peer's stats key of a descriptor.
//
// A document may also have a proxy section (Proxy): Envoy's rate-limit actions, by which
// `sluice proxy` turns an HTTP request into descriptors of the document's domain.
//
// A Config is immutable once built and safe for concurrent use; lookups allocate nothing.
package config

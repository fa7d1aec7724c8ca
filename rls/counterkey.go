package rls

import "github.com/sluicehq/sluice/config"

// CounterKey returns the key a descriptor of domain with entries is counted under, as Decide
// builds it under cfg: "domain|k1=v1|k2=v2", escaped, a value matched by a share_threshold
// wildcard replaced by the wildcard (its values share one counter). Two descriptors share a
// counter exactly when their keys are equal. Package replay keys its exact reference by it.
func CounterKey(cfg *config.Config, domain string, entries []Entry) string {
	var buf [DefaultMaxDescriptorEntries]string
	var shared []string
	if len(entries) <= len(buf) {
		shared = buf[:len(entries)]
	} else {
		shared = make([]string, len(entries))
	}
	config.LookupShared(cfg.Domain(domain), entries, shared)
	return descriptorKey(domain, entries, shared)
}

// RedactKey returns a CounterKey as telemetry shows it: the value of each entry i hashed
// (HashPrefix and a keyed hash, the same within the process) unless raw[i]
// (config.Limit.RawValues: the rules name the value, or say telemetry: raw).
func RedactKey(key string, raw []bool) string { return redactKey(key, raw) }

// RedactValue returns a request value as telemetry shows one the rules do not allow raw.
func RedactValue(v string) string { return hashValue(v) }

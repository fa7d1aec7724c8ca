package xds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/config"
)

// DecodeDump decodes a dumped snapshot, JSON or YAML (name names it in errors): the
// RateLimitConfig resources in their proto JSON form, as one resource, a list of them, or an
// object whose "resources" lists them (a DiscoveryResponse, whose other fields are ignored).
// A resource may carry "@type", which must be TypeURL. Unknown fields are errors.
func DecodeDump(name string, data []byte) ([]*rlsconf.RateLimitConfig, error) {
	if len(data) > config.MaxFileSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than the maximum of %d", ErrInvalid, name, len(data), config.MaxFileSize)
	}
	var doc any
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty (want RateLimitConfig resources)", ErrInvalid, name)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	var items []any
	switch d := doc.(type) {
	case []any:
		items = d
	case map[string]any:
		if rs, ok := d["resources"]; ok {
			if items, ok = rs.([]any); !ok {
				return nil, fmt.Errorf("%w: %s: resources: want a list", ErrInvalid, name)
			}
		} else {
			items = []any{d}
		}
	default:
		return nil, fmt.Errorf("%w: %s: want a RateLimitConfig, a list of them, or {resources: [...]}", ErrInvalid, name)
	}
	var errs []error
	out := make([]*rlsconf.RateLimitConfig, 0, len(items))
	for i, it := range items {
		r, err := decodeResource(it)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: resources[%d]: %v", ErrInvalid, name, i, err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func decodeResource(it any) (*rlsconf.RateLimitConfig, error) {
	m, ok := it.(map[string]any)
	if !ok {
		return nil, errors.New("want a RateLimitConfig (a mapping of fields)")
	}
	if t, ok := m["@type"]; ok {
		if t != TypeURL {
			return nil, fmt.Errorf("@type %q, want %s", t, TypeURL)
		}
		delete(m, "@type")
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	r := &rlsconf.RateLimitConfig{}
	if err := protojson.Unmarshal(js, r); err != nil {
		return nil, err
	}
	return r, nil
}

// LoadDump decodes a dumped snapshot (DecodeDump) and compiles it with o, as the client
// compiles the snapshots it receives.
func LoadDump(name string, data []byte, o config.Options) (*config.Config, error) {
	res, err := DecodeDump(name, data)
	if err != nil {
		return nil, err
	}
	c, err := CompileConfigs(o, res)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3" // @type registrations
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// envoyBlock is an Envoy configuration block of the documentation.
type envoyBlock struct {
	where string // file:line
	yaml  string
}

// envoyBlocks returns the ```yaml blocks of README.md and docs/*.md that are Envoy
// configuration: those whose top-level keys are http_filters or clusters, or that carry a
// typed_config "@type".
func envoyBlocks(t *testing.T) []envoyBlock {
	t.Helper()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []envoyBlock
	for _, f := range append(files, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "```yaml") {
				continue
			}
			start := i + 1
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
			body := strings.Join(lines[start:i], "\n")
			if strings.Contains(body, "\"@type\"") || regexp.MustCompile(`(?m)^(http_filters|clusters):`).MatchString(body) {
				out = append(out, envoyBlock{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(f, "../"), start), yaml: body})
			}
		}
	}
	return out
}

// routeRateLimits is the route rate_limits the documentation tells Envoy users to attach
// ("Next to Envoy": `rate_limits: [...]` in the text).
func routeRateLimits(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(rate_limits: \\[\\{actions: [^`]*)`").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/OPERATIONS.md: no `rate_limits: [{actions: ...}]` for the route")
	}
	return string(m[1])
}

// yamlToJSON converts a YAML document to JSON, as Envoy reads its YAML configuration.
func yamlToJSON(src string) (map[string]any, error) {
	var v map[string]any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkEnvoy unmarshals js into msg the way Envoy reads a configuration (protojson: unknown
// fields, misspelt enums and malformed durations refused; every "@type" resolved), then runs
// the protoc-gen-validate rules of msg and of every message packed in an Any inside it. It
// returns the type URL of each Any by its path.
func checkEnvoy(js any, msg proto.Message) (map[string]string, error) {
	b, err := json.Marshal(js)
	if err != nil {
		return nil, err
	}
	if err := protojson.Unmarshal(b, msg); err != nil {
		return nil, err
	}
	types := map[string]string{}
	return types, validateDeep(msg.ProtoReflect(), "", types)
}

// validateDeep runs ValidateAll on m (which checks the messages embedded in it), and on the
// message of every Any in it, which protoc-gen-validate does not look inside; path names
// where a failure is. types receives the type URL of each Any by its path.
func validateDeep(m protoreflect.Message, path string, types map[string]string) error {
	var errs []error
	if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", path, m.Descriptor().FullName(), err))
		}
	}
	return errors.Join(append(errs, validateAnys(m, path, types))...)
}

// validateAnys finds the Anys inside m and runs validateDeep on their messages.
func validateAnys(m protoreflect.Message, path string, types map[string]string) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		types[path] = a.GetTypeUrl()
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return validateDeep(inner.ProtoReflect(), path+"("+a.GetTypeUrl()+")", types)
	}
	var errs []error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				errs = append(errs, validateAnys(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), types))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				errs = append(errs, validateAnys(mv.Message(), p+"["+k.String()+"]", types))
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			errs = append(errs, validateAnys(v.Message(), p, types))
		}
		return true
	})
	return errors.Join(errs...)
}

// checkQuotaFilter checks what the protos cannot say of a rate_limit_quota filter, from the
// type URLs of the Anys of its http_connection_manager: the action of each bucket matcher
// is a RateLimitQuotaBucketSettings (the only action the filter takes), and the inputs of
// its predicates and custom bucket id values are HTTP request inputs.
func checkQuotaFilter(types map[string]string) error {
	const settings = "type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings"
	var errs []error
	actions := 0
	for path, url := range types {
		if !strings.Contains(path, ".bucket_matchers.") {
			continue
		}
		switch {
		case strings.HasSuffix(path, ".on_match.action.typed_config"):
			actions++
			if url != settings {
				errs = append(errs, fmt.Errorf("%s: %s, want %s", path, url, settings))
			}
		case strings.HasSuffix(path, ".input.typed_config"), strings.HasSuffix(path, ".custom_value.typed_config"):
			if !strings.HasPrefix(url, "type.googleapis.com/envoy.type.matcher.v3.HttpRequest") {
				errs = append(errs, fmt.Errorf("%s: %s is not an HTTP request input", path, url))
			}
		}
	}
	if actions == 0 {
		errs = append(errs, errors.New("bucket_matchers: no on_match action"))
	}
	return errors.Join(errs...)
}

// grpcClusters returns the cluster_name of every envoy_grpc service in v.
func grpcClusters(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if g, ok := x.(map[string]any); ok && k == "envoy_grpc" {
				if name, ok := g["cluster_name"].(string); ok {
					out = append(out, name)
				}
			}
			out = append(out, grpcClusters(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, grpcClusters(x)...)
		}
	}
	return out
}

// TestEnvoyConfigsOfTheDocs: every Envoy configuration block of the documentation (the
// ratelimit and rate_limit_quota filters, the cluster) is one Envoy accepts, as far as
// go-control-plane's protos and their validation rules tell: http_filters are checked inside
// an http_connection_manager (with the route rate_limits of the text and a router filter
// last), clusters as Cluster, the typed configs in them by their "@type". Every gRPC
// service's cluster must be defined by a block.
func TestEnvoyConfigsOfTheDocs(t *testing.T) {
	blocks := envoyBlocks(t)
	var filters, clusters, quotaFilters int
	defined := map[string]bool{}
	var used []string
	for _, b := range blocks {
		doc, err := yamlToJSON(b.yaml)
		if err != nil {
			t.Errorf("%s: YAML: %v", b.where, err)
			continue
		}
		for key, v := range doc {
			switch key {
			case "http_filters":
				fs, _ := v.([]any)
				filters += len(fs)
				rl, err := yamlToJSON(routeRateLimits(t))
				if err != nil {
					t.Fatalf("route rate_limits: %v", err)
				}
				hcm := map[string]any{
					"stat_prefix": "docs",
					"route_config": map[string]any{"virtual_hosts": []any{map[string]any{
						"name": "all", "domains": []any{"*"},
						"routes": []any{map[string]any{"match": map[string]any{"prefix": "/"},
							"route": map[string]any{"cluster": "app", "rate_limits": rl["rate_limits"]}}},
					}}},
					"http_filters": append(append([]any{}, fs...), map[string]any{"name": "envoy.filters.http.router",
						"typed_config": map[string]any{"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}),
				}
				types, err := checkEnvoy(hcm, &hcmv3.HttpConnectionManager{})
				if err != nil {
					t.Errorf("%s: http_filters: %v", b.where, err)
				}
				for _, url := range types {
					if strings.HasSuffix(url, ".RateLimitQuotaFilterConfig") {
						quotaFilters++
						if err := checkQuotaFilter(types); err != nil {
							t.Errorf("%s: rate_limit_quota: %v", b.where, err)
						}
					}
				}
			case "clusters":
				cs, _ := v.([]any)
				for i, c := range cs {
					clusters++
					var cl clusterv3.Cluster
					if _, err := checkEnvoy(c, &cl); err != nil {
						t.Errorf("%s: clusters[%d]: %v", b.where, i, err)
					}
					defined[cl.GetName()] = true
				}
			case "typed_per_filter_config": // a route's: each filter's Any
				configs, _ := v.(map[string]any)
				for name, c := range configs {
					if _, err := checkEnvoy(c, &anypb.Any{}); err != nil {
						t.Errorf("%s: typed_per_filter_config.%s: %v", b.where, name, err)
					}
				}
			default:
				t.Errorf("%s: top-level key %q: the test does not know which Envoy message it is", b.where, key)
			}
		}
		used = append(used, grpcClusters(doc)...)
	}
	if filters < 2 || clusters < 1 || quotaFilters < 1 {
		t.Fatalf("found %d filters (%d rate_limit_quota) and %d clusters in %d blocks; want the ratelimit and rate_limit_quota filters and the sluice cluster", filters, quotaFilters, clusters, len(blocks))
	}
	for _, c := range used {
		if !defined[c] {
			t.Errorf("envoy_grpc cluster_name %q: no cluster of the docs defines it", c)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/config"
)

// yamlDocs decodes every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// dig follows keys (strings into maps, ints into lists) through a decoded YAML document.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// checkPeerEnv fails unless env is envoyproxy/ratelimit's environment as serve honours it
// whole: no error, no warning, the rules in the runtime directory and the Redis store.
func checkPeerEnv(t *testing.T, where string, env map[string]string, wantStore string) {
	t.Helper()
	e := readPeerEnv(envOf(env))
	if !e.detected || len(e.errs) > 0 || len(e.flagErrs) > 0 || len(e.warnings) > 0 {
		t.Errorf("%s: errors %v %v, warnings %v", where, e.errs, e.flagErrs, e.warnings)
	}
	if e.defaults["config"] != "/data/ratelimit/config" || e.defaults["store"] != wantStore {
		t.Errorf("%s: rules %q, store %q", where, e.defaults["config"], e.defaults["store"])
	}
}

func compileRules(t *testing.T, name string, text []byte) {
	t.Helper()
	doc, err := config.Decode(name, text)
	if err == nil {
		_, err = config.Compile(doc)
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// TestKubernetesExample: the manifests' ratelimit Deployment gives serve the peer's
// environment with nothing it cannot honour, runs as the image's user, and its ConfigMap's
// rules compile; the Envoy Gateway example overrides the image in one line.
func TestKubernetesExample(t *testing.T) {
	var sawDeployment, sawRules bool
	for _, d := range yamlDocs(t, "../../examples/kubernetes/sluice.yaml") {
		switch {
		case d["kind"] == "ConfigMap":
			rules, _ := dig(d, "data", "rules.yaml").(string)
			compileRules(t, "ConfigMap rules.yaml", []byte(rules))
			sawRules = true
		case d["kind"] == "Deployment" && dig(d, "metadata", "name") == "ratelimit":
			spec := dig(d, "spec", "template", "spec")
			env := map[string]string{}
			list, _ := dig(spec, "containers", 0, "env").([]any)
			for _, kv := range list {
				env[dig(kv, "name").(string)] = dig(kv, "value").(string)
			}
			checkPeerEnv(t, "Deployment ratelimit", env, "redis://redis:6379")
			if dig(spec, "securityContext", "runAsUser") != 65532 {
				t.Errorf("runAsUser %v, want the image's 65532", dig(spec, "securityContext", "runAsUser"))
			}
			sawDeployment = true
		}
	}
	if !sawDeployment || !sawRules {
		t.Errorf("deployment %t, rules %t", sawDeployment, sawRules)
	}
	// Envoy Gateway's configuration is the envoy-gateway.yaml key of the envoy-gateway-config
	// ConfigMap, not a resource kubectl can apply (issue 30): the example is that ConfigMap.
	cm := yamlDocs(t, "../../examples/kubernetes/envoy-gateway.yaml")[0]
	if cm["kind"] != "ConfigMap" || dig(cm, "metadata", "name") != "envoy-gateway-config" || dig(cm, "metadata", "namespace") != "envoy-gateway-system" {
		t.Fatalf("examples/kubernetes/envoy-gateway.yaml: %v, want the ConfigMap envoy-gateway-config of envoy-gateway-system", cm["metadata"])
	}
	var eg map[string]any
	if err := yaml.Unmarshal([]byte(dig(cm, "data", "envoy-gateway.yaml").(string)), &eg); err != nil {
		t.Fatalf("envoy-gateway.yaml: %v", err)
	}
	if eg["kind"] != "EnvoyGateway" || dig(eg, "gateway", "controllerName") != "gateway.envoyproxy.io/gatewayclass-controller" ||
		dig(eg, "provider", "type") != "Kubernetes" {
		t.Errorf("envoy-gateway.yaml: %v, want an EnvoyGateway with the chart's defaults", eg)
	}
	// The chart splits the image at its first "/" (the registry global.imageRegistry replaces)
	// and adds its own tag when there is none: a full name with a tag.
	img, _ := dig(eg, "provider", "kubernetes", "rateLimitDeployment", "container", "image").(string)
	if name, tag, ok := strings.Cut(img[strings.LastIndexByte(img, '/')+1:], ":"); !strings.Contains(img, "/") || !ok || name != "sluice" || tag == "" {
		t.Errorf("EnvoyGateway rateLimitDeployment image %q, want registry/sluice:tag", img)
	}
}

// TestComposeExample: the compose file's ratelimit service gives serve the peer's
// environment with nothing it cannot honour, its rules compile, and its Envoy configuration is
// a valid bootstrap whose rate limit filter asks the ratelimit cluster for the rules' domain.
func TestComposeExample(t *testing.T) {
	c := yamlDocs(t, "../../examples/compose/docker-compose.yaml")[0]
	env := map[string]string{}
	for k, v := range dig(c, "services", "ratelimit", "environment").(map[string]any) {
		env[k] = v.(string)
	}
	checkPeerEnv(t, "compose ratelimit", env, "redis://redis:6379")
	rules, err := os.ReadFile("../../examples/compose/ratelimit/config/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	compileRules(t, "compose rules.yaml", rules)
	j, err := json.Marshal(yamlDocs(t, "../../examples/compose/envoy.yaml")[0])
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(j, &b); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Errorf("envoy.yaml: %v", err)
	}
	if !strings.Contains(string(j), `"domain":"edge"`) || !strings.Contains(string(j), `"cluster_name":"ratelimit"`) {
		t.Errorf("envoy.yaml does not ask the ratelimit cluster for domain edge")
	}
}

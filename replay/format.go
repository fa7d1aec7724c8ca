package replay

import (
	"errors"
	"fmt"
	"strings"
)

// Format says how the lines of a log become Records. Build it with ParseFormat. A Format is
// immutable; each read of a log parses with its own state.
type Format struct {
	name string
	text *template
	json *jsonFormat
	csv  map[string]field // CSV: the mapping, by column name (the header line names them)
}

// FormatNames lists the formats ParseFormat accepts, as the command's help shows them.
var FormatNames = []string{"envoy", "envoy-json", "combined", "json", "csv", "envoy:FORMAT", "nginx:LOG_FORMAT"}

// EnvoyGatewayJSONFields is the JSON access log format Envoy Gateway configures by default
// (EnvoyJSONLogFields in internal/xds/translator/accesslog.go, envoyproxy/gateway v1.9): the
// key of each field and the Envoy command operator it logs. The envoy-json format reads
// these keys.
var EnvoyGatewayJSONFields = map[string]string{
	"start_time":                        "%START_TIME%",
	"method":                            "%REQ(:METHOD)%",
	"x-envoy-origin-path":               "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
	"protocol":                          "%PROTOCOL%",
	"response_code":                     "%RESPONSE_CODE%",
	"response_flags":                    "%RESPONSE_FLAGS%",
	"response_code_details":             "%RESPONSE_CODE_DETAILS%",
	"connection_termination_details":    "%CONNECTION_TERMINATION_DETAILS%",
	"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
	"bytes_received":                    "%BYTES_RECEIVED%",
	"bytes_sent":                        "%BYTES_SENT%",
	"duration":                          "%DURATION%",
	"x-envoy-upstream-service-time":     "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
	"x-forwarded-for":                   "%REQ(X-FORWARDED-FOR)%",
	"user-agent":                        "%REQ(USER-AGENT)%",
	"x-request-id":                      "%REQ(X-REQUEST-ID)%",
	":authority":                        "%REQ(:AUTHORITY)%",
	"upstream_host":                     "%UPSTREAM_HOST%",
	"upstream_cluster":                  "%UPSTREAM_CLUSTER%",
	"upstream_local_address":            "%UPSTREAM_LOCAL_ADDRESS%",
	"downstream_local_address":          "%DOWNSTREAM_LOCAL_ADDRESS%",
	"downstream_remote_address":         "%DOWNSTREAM_REMOTE_ADDRESS%",
	"requested_server_name":             "%REQUESTED_SERVER_NAME%",
	"route_name":                        "%ROUTE_NAME%",
}

// The names of a field mapping (ParseFormat's fields), and the key or column each reads
// when the mapping does not name one.
var mappingNames = []string{"time", "client", "method", "path", "authority", "scheme", "cost"}

// ParseFormat returns the format named by spec:
//
//   - "envoy": Envoy's default text format (EnvoyDefaultFormat);
//   - "envoy:FORMAT": an Envoy format string (%START_TIME%, %REQ(X-API-KEY)%, ...);
//   - "combined": nginx's and Apache's combined format (CombinedFormat);
//   - "nginx:LOG_FORMAT": an nginx log_format ($remote_addr, $http_x_api_key, ...);
//   - "envoy-json": JSON lines of Envoy Gateway's default JSON format
//     (EnvoyGatewayJSONFields), or any Envoy json_format with the same keys;
//   - "json": JSON lines, one object a line;
//   - "csv": comma-separated values whose first line names the columns.
//
// fields maps the JSON keys or CSV columns (and, for envoy-json, overrides its keys), a
// comma-separated list of NAME=KEY: time (RFC 3339, the common log format, or Unix time),
// client (the connection's peer address), method, path (the target: path and query),
// authority, scheme, cost (the request's units, default 1) and header:NAME (a request
// header). json and csv read a key or column named as each field when fields does not
// map it. Every error names the flag's part that is wrong.
func ParseFormat(spec, fields string) (*Format, error) {
	f := &Format{name: spec}
	mapping, err := parseMapping(fields)
	if err != nil {
		return nil, err
	}
	textOnly := func() error {
		if fields != "" {
			return fmt.Errorf("fields: the %s format names its own fields (a mapping is for envoy-json, json and csv)", spec)
		}
		return nil
	}
	switch {
	case spec == "envoy":
		f.text, err = compileEnvoy(EnvoyDefaultFormat)
		return f, errors.Join(err, textOnly())
	case strings.HasPrefix(spec, "envoy:"):
		f.text, err = compileEnvoy(strings.TrimPrefix(spec, "envoy:"))
		return f, errors.Join(err, textOnly())
	case spec == "combined":
		f.text, err = compileNginx(CombinedFormat)
		return f, errors.Join(err, textOnly())
	case strings.HasPrefix(spec, "nginx:"):
		f.text, err = compileNginx(strings.TrimPrefix(spec, "nginx:"))
		return f, errors.Join(err, textOnly())
	case spec == "envoy-json":
		keys := make(map[string]field, len(EnvoyGatewayJSONFields))
		for k, op := range EnvoyGatewayJSONFields {
			keys[k] = envoyField(strings.Trim(op, "%"))
		}
		f.json = &jsonFormat{keys: override(keys, mapping)}
	case spec == "json":
		f.json = &jsonFormat{keys: withDefaults(mapping)}
	case spec == "csv":
		f.csv = withDefaults(mapping)
	default:
		return nil, fmt.Errorf("format: unknown %q (want one of %s)", spec, strings.Join(FormatNames, ", "))
	}
	return f, nil
}

// Name returns the format's name as given to ParseFormat.
func (f *Format) Name() string { return f.name }

// mapped is one NAME=KEY of a field mapping.
type mapped struct {
	key string
	f   field
}

// parseMapping reads a comma-separated list of NAME=KEY.
func parseMapping(spec string) ([]mapped, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []mapped
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		name, key, ok := strings.Cut(strings.TrimSpace(item), "=")
		name, key = strings.TrimSpace(name), strings.TrimSpace(key)
		if !ok || name == "" || key == "" {
			return nil, fmt.Errorf("fields: %q: want NAME=KEY, NAME one of %s or header:NAME", item, strings.Join(mappingNames, ", "))
		}
		f, err := mappingField(name)
		if err != nil {
			return nil, err
		}
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("fields: %s is mapped twice", name)
		}
		seen[strings.ToLower(name)] = true
		out = append(out, mapped{key: key, f: f})
	}
	return out, nil
}

func mappingField(name string) (field, error) {
	if h, ok := strings.CutPrefix(name, "header:"); ok {
		if h == "" || strings.ContainsAny(h, " \t:") {
			return field{}, fmt.Errorf("fields: %q: want header:NAME with a header name", name)
		}
		return field{kind: kindHeader, header: strings.ToLower(h)}, nil
	}
	switch name {
	case "time":
		return field{kind: kindTime}, nil
	case "client":
		return field{kind: kindDirectPeer}, nil
	case "method":
		return field{kind: kindMethod}, nil
	case "path":
		return field{kind: kindTarget}, nil
	case "authority":
		return field{kind: kindAuthority}, nil
	case "scheme":
		return field{kind: kindScheme}, nil
	case "cost":
		return field{kind: kindCost}, nil
	}
	return field{}, fmt.Errorf("fields: unknown field %q (want one of %s or header:NAME)", name, strings.Join(mappingNames, ", "))
}

// withDefaults is the mapping with a key named as each field it does not map.
func withDefaults(m []mapped) map[string]field {
	keys := map[string]field{}
	for _, name := range mappingNames {
		f, _ := mappingField(name)
		keys[name] = f
	}
	return override(keys, m)
}

// override maps each of m's keys, dropping the keys that held one of its fields before.
func override(keys map[string]field, m []mapped) map[string]field {
	for _, x := range m {
		for k, f := range keys {
			if sameField(f, x.f) {
				delete(keys, k)
			}
		}
	}
	for _, x := range m {
		keys[x.key] = x.f
	}
	return keys
}

// sameField reports whether a and b fill the same part of a Record.
func sameField(a, b field) bool {
	norm := func(k kind) kind {
		if k == kindDirectPeer {
			return kindPeer
		}
		return k
	}
	return norm(a.kind) == norm(b.kind) && a.header == b.header
}

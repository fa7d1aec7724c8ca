package replay

import (
	"fmt"
	"strings"
)

// EnvoyDefaultFormat is Envoy's default access log format, the one it writes when no format
// is configured: AccessLogFormatUtils::DEFAULT_FORMAT in source/common/formatter (and
// docs/root/configuration/observability/access_log/usage.rst, "Default Format String"), the
// same from Envoy 1.7 to 1.36.
const EnvoyDefaultFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" " +
	"%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% " +
	"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% " +
	"\"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" " +
	"\"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n"

// CombinedFormat is nginx's predefined "combined" log_format (ngx_http_combined_fmt in
// src/http/modules/ngx_http_log_module.c, nginx 1.31), the same line as Apache httpd's
// "combined" LogFormat (%h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\").
const CombinedFormat = `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`

// template is a text format: literal text between fields. A line matches when it has the
// literals in order; each field's value is the text between the literals around it.
type template struct {
	lits   []string // lits[0] comes before fields[0], lits[i+1] after fields[i]
	fields []field
}

// compileEnvoy compiles an Envoy format string: %OPERATOR%, %OPERATOR(ARG)% and
// %OPERATOR(ARG):LENGTH% between literal text (%% is a %).
func compileEnvoy(format string) (*template, error) {
	return compile(strings.TrimSuffix(format, "\n"), '%', func(i int) (string, int, error) {
		end := strings.IndexByte(format[i+1:], '%')
		if end < 0 {
			return "", 0, fmt.Errorf("format: %% at byte %d opens no operator (want %%OPERATOR%%)", i)
		}
		return format[i+1 : i+1+end], i + end + 2, nil
	}, envoyField)
}

// compile compiles a format of literal text and fields, each starting with the byte open:
// at a field's start i, next returns its name and where the text after it starts; a field
// named "" is the open byte itself, as text. fieldOf says what a name holds.
func compile(format string, open byte, next func(i int) (string, int, error), fieldOf func(string) field) (*template, error) {
	t := &template{}
	var lit strings.Builder
	for i := 0; i < len(format); {
		if format[i] != open {
			lit.WriteByte(format[i])
			i++
			continue
		}
		name, end, err := next(i)
		if err != nil {
			return nil, err
		}
		i = end
		if name == "" {
			lit.WriteByte(open)
			continue
		}
		if err := t.add(&lit, fieldOf(name), string(open)+name); err != nil {
			return nil, err
		}
	}
	t.lits = append(t.lits, lit.String())
	return t, t.check()
}

// envoyField is the field an Envoy command operator writes.
func envoyField(op string) field {
	name, arg, _ := strings.Cut(op, "(")
	arg, _, _ = strings.Cut(arg, ")")
	switch name {
	case "START_TIME":
		return field{kind: kindTime}
	case "DOWNSTREAM_REMOTE_ADDRESS", "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":
		return field{kind: kindPeer}
	case "DOWNSTREAM_DIRECT_REMOTE_ADDRESS", "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT":
		return field{kind: kindDirectPeer}
	case "REQ":
		return requestHeaderField(arg)
	}
	return field{}
}

// requestHeaderField is the field of %REQ(X?Y)%: the header X, else Y; a path header
// (X-ENVOY-ORIGINAL-PATH?:PATH) is the target.
func requestHeaderField(arg string) field {
	first, alt, _ := strings.Cut(arg, "?")
	for _, h := range []string{first, alt} {
		switch strings.ToLower(h) {
		case ":path":
			return field{kind: kindTarget}
		case ":method":
			return field{kind: kindMethod}
		case ":authority", "host":
			return field{kind: kindAuthority}
		case ":scheme":
			return field{kind: kindScheme}
		}
	}
	return field{kind: kindHeader, header: strings.ToLower(first)}
}

// compileNginx compiles an nginx log_format: $variable and ${variable} between literal text.
func compileNginx(format string) (*template, error) {
	return compile(format, '$', func(i int) (string, int, error) {
		j := i + 1
		braced := j < len(format) && format[j] == '{'
		if braced {
			j++
		}
		k := j
		for k < len(format) && isVarByte(format[k]) {
			k++
		}
		name := format[j:k]
		if name == "" || (braced && (k == len(format) || format[k] != '}')) {
			return "", 0, fmt.Errorf("format: $ at byte %d names no variable", i)
		}
		if braced {
			k++
		}
		return name, k, nil
	}, nginxField)
}

func isVarByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// nginxField is the field an nginx variable writes.
func nginxField(name string) field {
	switch name {
	case "remote_addr", "binary_remote_addr", "realip_remote_addr":
		return field{kind: kindPeer}
	case "time_local", "time_iso8601", "msec":
		return field{kind: kindTime}
	case "request":
		return field{kind: kindRequestLine}
	case "request_method":
		return field{kind: kindMethod}
	case "request_uri":
		return field{kind: kindTarget}
	case "host", "http_host":
		return field{kind: kindAuthority}
	case "scheme":
		return field{kind: kindScheme}
	}
	if h, ok := strings.CutPrefix(name, "http_"); ok {
		return field{kind: kindHeader, header: strings.ReplaceAll(h, "_", "-")}
	}
	return field{}
}

// add appends a field after the literal text in lit.
func (t *template) add(lit *strings.Builder, f field, name string) error {
	l := lit.String()
	if len(t.fields) > 0 && l == "" {
		return fmt.Errorf("format: %s follows another field with no text between them: the two cannot be told apart", name)
	}
	f.quoted = strings.HasSuffix(l, `"`)
	t.lits = append(t.lits, l)
	t.fields = append(t.fields, f)
	lit.Reset()
	return nil
}

// check reports a format that could not place a request in time.
func (t *template) check() error {
	for _, f := range t.fields {
		if f.kind == kindTime {
			return nil
		}
	}
	return fmt.Errorf("format: no field holds the time (Envoy's %%START_TIME%%, nginx's $time_local, $time_iso8601 or $msec)")
}

// parse reads one line into rec.
func (t *template) parse(line string, rec *Record, ts *timeCache) error {
	if !strings.HasPrefix(line, t.lits[0]) {
		return fmt.Errorf("does not start with %q", t.lits[0])
	}
	pos := len(t.lits[0])
	for i := range t.fields {
		f := &t.fields[i]
		lit := t.lits[i+1]
		end := len(line)
		if lit != "" {
			j := indexLiteral(line[pos:], lit, f.quoted)
			if j < 0 {
				return fmt.Errorf("no %q after byte %d", lit, pos)
			}
			end = pos + j
		}
		if err := f.set(rec, line[pos:end], ts); err != nil {
			return err
		}
		pos = end + len(lit)
	}
	if pos != len(line) {
		return fmt.Errorf("unexpected text after byte %d", pos)
	}
	return nil
}

// indexLiteral finds lit in s; inside quotes, a quote escaped by a backslash (Apache's \")
// is part of the value, not its end.
func indexLiteral(s, lit string, quoted bool) int {
	from := 0
	for {
		j := strings.Index(s[from:], lit)
		if j < 0 || !quoted || lit[0] != '"' {
			if j < 0 {
				return -1
			}
			return from + j
		}
		at := from + j
		slashes := 0
		for k := at - 1; k >= 0 && s[k] == '\\'; k-- {
			slashes++
		}
		if slashes%2 == 0 {
			return at
		}
		from = at + 1
	}
}

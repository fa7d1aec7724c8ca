package replay

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// kind is what a logged field holds.
type kind uint8

const (
	kindSkip        kind = iota
	kindTime             // the request's start: RFC 3339, the common log format, or Unix seconds
	kindPeer             // the connection's peer address
	kindDirectPeer       // the physical peer (Envoy's DOWNSTREAM_DIRECT_REMOTE_ADDRESS), preferred
	kindMethod           // the request method
	kindTarget           // path and query
	kindAuthority        // the host
	kindScheme           // http or https
	kindHeader           // a request header, named by field.header
	kindCost             // the request's units
	kindRequestLine      // "METHOD TARGET PROTOCOL"
)

// field is one field of a format: what it holds, and for a header, its name.
type field struct {
	kind   kind
	header string
	quoted bool // text formats: the value sits between quotes, and may hold escapes
}

// set stores the value v of field f in rec. "-" and "" mean not set, as Envoy, nginx and
// Apache log an absent value. An error names the field, never the value: values from
// requests (API keys, tokens) stay out of messages.
func (f *field) set(rec *Record, v string, ts *timeCache) error {
	if v == "-" || v == "" || f.kind == kindSkip {
		return nil
	}
	if f.quoted && strings.IndexByte(v, '\\') >= 0 {
		v = unescape(v)
	}
	switch f.kind {
	case kindTime:
		at, err := ts.parse(v)
		if err != nil {
			return err
		}
		rec.At = at
	case kindPeer:
		if rec.Peer == "" {
			rec.Peer = v
		}
	case kindDirectPeer:
		rec.Peer = v
	case kindMethod:
		rec.Method = v
	case kindTarget:
		rec.Target = v
	case kindAuthority:
		rec.Authority = v
	case kindScheme:
		rec.Scheme = v
	case kindHeader:
		rec.Headers = append(rec.Headers, Header{Name: f.header, Value: v})
	case kindCost:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			f, ferr := strconv.ParseFloat(v, 64) // JSON numbers: 12.0
			if ferr != nil || f < 0 || f != float64(int64(f)) {
				return errors.New("cost: not a whole number of units")
			}
			n = int64(f)
		}
		rec.Cost = n
	case kindRequestLine:
		// The target is all between the method and the protocol: nginx logs a request line
		// as it came, spaces in its target included.
		method, rest, ok := strings.Cut(v, " ")
		end := strings.LastIndexByte(rest, ' ')
		if !ok || method == "" || end <= 0 {
			return errors.New("request line: not METHOD TARGET PROTOCOL")
		}
		rec.Method, rec.Target = method, rest[:end]
	}
	return nil
}

// unescape decodes the escapes of a quoted log value: nginx writes a quote, a backslash and
// bytes outside printable ASCII as \xHH, Apache a quote as \" and a backslash as \\.
func unescape(v string) string {
	var b strings.Builder
	b.Grow(len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := v[i]; e {
		case 'x':
			if i+2 < len(v) {
				if hi, lo := unhex(v[i+1]), unhex(v[i+2]); hi >= 0 && lo >= 0 {
					b.WriteByte(byte(hi<<4 | lo))
					i += 2
					continue
				}
			}
			b.WriteString(`\x`)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// timeCache parses the instants of a log, remembering the last one: a log with one timestamp
// a second repeats it on every line of that second.
type timeCache struct {
	last string
	at   int64
}

// The layout of the common log format's time (nginx's $time_local, Apache's %t).
const clfLayout = "02/Jan/2006:15:04:05 -0700"

// parse reads an instant: RFC 3339 (Envoy's START_TIME, nginx's $time_iso8601), the common
// log format (nginx's $time_local, Apache's %t, with or without its brackets), or Unix time
// as a number (seconds, with a fraction, as nginx's $msec; or whole milliseconds,
// microseconds or nanoseconds, told apart by their digits).
func (c *timeCache) parse(v string) (int64, error) {
	if v == c.last && v != "" {
		return c.at, nil
	}
	at, err := parseTime(v)
	if err != nil {
		return 0, err
	}
	c.last, c.at = v, at
	return at, nil
}

func parseTime(v string) (int64, error) {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	if isEpoch(v) {
		return parseEpoch(v)
	}
	layout := time.RFC3339Nano
	if len(v) > 2 && v[2] == '/' {
		layout = clfLayout
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		return 0, errors.New("time: neither RFC 3339, the common log format nor Unix time")
	}
	return t.UnixNano(), nil
}

func isEpoch(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// parseEpoch reads Unix time: seconds with an optional fraction, or a whole number of
// milliseconds (13 digits), microseconds (16) or nanoseconds (19).
func parseEpoch(v string) (int64, error) {
	whole, frac, hasFrac := strings.Cut(v, ".")
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || whole == "" {
		return 0, errors.New("time: not Unix time")
	}
	switch {
	case hasFrac:
		if len(frac) > 9 || strings.IndexByte(frac, '.') >= 0 {
			return 0, errors.New("time: more than 9 fraction digits")
		}
		ns, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		if err != nil && frac != "" {
			return 0, errors.New("time: not Unix time")
		}
		return n*1e9 + ns, nil
	case len(whole) >= 19:
		return n, nil
	case len(whole) >= 16:
		return n * 1e3, nil
	case len(whole) >= 13:
		return n * 1e6, nil
	}
	return n * 1e9, nil
}

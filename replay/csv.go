package replay

import (
	"errors"
	"fmt"
	"strings"
)

// csvParser reads CSV lines (RFC 4180: fields quoted with ", a quote in one doubled; a
// quoted field holds no line break) whose first line names the columns.
type csvParser struct {
	mapping map[string]field
	columns []field // by index, from the header line; nil until it is read
	cells   []string
}

// header reads the header line: every mapped column must be there but cost and the headers,
// which a log may lack.
func (p *csvParser) header(line string) error {
	cells, err := splitCSV(strings.TrimPrefix(line, "\ufeff"), nil)
	if err != nil {
		return err
	}
	p.columns = make([]field, len(cells))
	found := map[string]bool{}
	for i, c := range cells {
		if f, ok := p.mapping[c]; ok {
			p.columns[i], found[c] = f, true
		}
	}
	var missing []string
	for k, f := range p.mapping {
		if !found[k] && (f.kind == kindTime || f.kind == kindDirectPeer) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("header line: no column %s (name it with --fields time=COLUMN,client=COLUMN)", strings.Join(missing, ", "))
	}
	return nil
}

// parse reads one line into rec.
func (p *csvParser) parse(line string, rec *Record, ts *timeCache) error {
	cells, err := splitCSV(line, p.cells[:0])
	p.cells = cells
	if err != nil {
		return err
	}
	if len(cells) != len(p.columns) {
		return fmt.Errorf("%d fields, the header line has %d", len(cells), len(p.columns))
	}
	for i := range cells {
		if err := p.columns[i].set(rec, cells[i], ts); err != nil {
			return err
		}
	}
	return nil
}

// splitCSV appends the fields of one CSV line to dst.
func splitCSV(line string, dst []string) ([]string, error) {
	line = strings.TrimSuffix(line, "\r")
	for {
		if strings.HasPrefix(line, `"`) {
			var b strings.Builder
			rest := line[1:]
			for {
				j := strings.IndexByte(rest, '"')
				if j < 0 {
					return dst, errors.New("unterminated quoted field (a field with a line break is not read)")
				}
				b.WriteString(rest[:j])
				rest = rest[j+1:]
				if strings.HasPrefix(rest, `"`) {
					b.WriteByte('"')
					rest = rest[1:]
					continue
				}
				break
			}
			dst = append(dst, b.String())
			if rest == "" {
				return dst, nil
			}
			if rest[0] != ',' {
				return dst, errors.New(`text after a quoted field's closing "`)
			}
			line = rest[1:]
			continue
		}
		v, rest, more := strings.Cut(line, ",")
		dst = append(dst, v)
		if !more {
			return dst, nil
		}
		line = rest
	}
}

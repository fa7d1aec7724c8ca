package config

import (
	"fmt"
	"strings"
)

// Problem is one problem of a rules file: where it is and what is wrong. Every problem that
// Load, Decode and Compile report is a *Problem (read with errors.As) wrapping ErrInvalid,
// joined with the others; its text is "config: invalid rules: FILE:LINE: PATH: REASON".
type Problem struct {
	// File is the rules file's name as given; Line its 1-based line (0: the whole file).
	File string
	Line int
	// Path is the YAML path of the field, e.g. descriptors[0].rate_limit.unit ("": the file).
	Path string
	// Reason says what is wrong.
	Reason string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteString(": ")
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	if p.Path != "" {
		b.WriteString(": ")
		b.WriteString(p.Path)
	}
	b.WriteString(": ")
	b.WriteString(p.Reason)
	return b.String()
}

// Unwrap returns ErrInvalid.
func (p *Problem) Unwrap() error { return ErrInvalid }

// under reports whether path is parent or a field or item below it.
func under(path, parent string) bool {
	if !strings.HasPrefix(path, parent) {
		return false
	}
	rest := path[len(parent):]
	return rest == "" || parent == "" || rest[0] == '.' || rest[0] == '['
}

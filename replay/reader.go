package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// MaxLineBytes bounds one line of a log: a longer one is malformed.
const MaxLineBytes = 1 << 20

// MaxMalformedShown is how many malformed lines a Report lists with their line numbers (all
// are counted).
const MaxMalformedShown = 20

// Input is a log to read.
type Input struct {
	// Name names the log in messages ("-": standard input).
	Name string
	// Open opens the log at its start. Suggest opens it twice (it reads the log twice).
	Open func() (io.ReadCloser, error)
	// Size is the log's size as stored (compressed for gzip), for the progress; 0: unknown.
	Size int64
}

// FileInput returns the Input of the file at path; "-" is standard input, which can be read
// once.
func FileInput(path string) (Input, error) {
	if path == "-" {
		var opened atomic.Bool
		return Input{Name: "-", Open: func() (io.ReadCloser, error) {
			if opened.Swap(true) {
				return nil, errors.New("replay: standard input can be read once: give the log as a file")
			}
			return io.NopCloser(os.Stdin), nil
		}}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return Input{}, fmt.Errorf("replay: log: %w", err)
	}
	if st.IsDir() {
		return Input{}, fmt.Errorf("replay: log: %s is a directory", path)
	}
	return Input{Name: path, Size: st.Size(), Open: func() (io.ReadCloser, error) { return os.Open(path) }}, nil
}

// Malformed counts the lines that could not be read, and lists the first MaxMalformedShown.
type Malformed struct {
	Count int64       `json:"count"`
	Lines []LineError `json:"lines,omitempty"`
}

// LineError is a line that could not be read: its number and why (naming the field, never
// quoting the line: it holds request values).
type LineError struct {
	Line   int64  `json:"line"`
	Reason string `json:"reason"`
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

func (m *Malformed) add(line int64, err error) {
	m.Count++
	if len(m.Lines) < MaxMalformedShown {
		m.Lines = append(m.Lines, LineError{Line: line, Reason: err.Error()})
	}
}

// Progress reports how far a read has come: bytes of the input read (as stored), of total
// (0: unknown), and lines.
type Progress func(read, total, lines int64)

// logReader reads the Records of one log.
type logReader struct {
	format    *Format
	strict    bool
	progress  Progress
	ts        timeCache
	csv       *csvParser
	malformed Malformed
	lines     int64
}

func newLogReader(f *Format, strict bool, progress Progress) *logReader {
	r := &logReader{format: f, strict: strict, progress: progress}
	if f.csv != nil {
		r.csv = &csvParser{mapping: f.csv}
	}
	return r
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// batchSize is the number of records read ahead in one batch; a few batches are in flight.
const batchSize, batches = 256, 4

// recordBatch is records read ahead, each holding its line.
type recordBatch struct {
	recs []Record
	n    int
}

// errStopped ends the reading goroutine when its reader stopped reading.
var errStopped = errors.New("replay: stopped")

// read calls fn with each record of the log in, in order (the Record is reused: fn must
// copy what it keeps). A malformed line is counted and skipped, or with strict, an error
// (a *LineError). fn's error stops the read. The log is read and parsed on a goroutine of
// its own, a few batches of records ahead of fn (gzip decompressed on yet another), so that
// on two cores reading and deciding overlap.
func (r *logReader) read(ctx context.Context, in Input, fn func(*Record) error) error {
	full := make(chan *recordBatch, batches)
	free := make(chan *recordBatch, batches+1) // holds every batch: returning one never blocks
	for range batches + 1 {
		free <- &recordBatch{recs: make([]Record, batchSize)}
	}
	done := make(chan struct{})
	var scanErr error
	go func() {
		defer close(full)
		cur := <-free
		scanErr = r.scan(ctx, in, func(rec *Record) error {
			dst := &cur.recs[cur.n]
			headers := dst.Headers
			*dst = *rec
			dst.Headers = append(headers[:0], rec.Headers...)
			if cur.n++; cur.n < len(cur.recs) {
				return nil
			}
			select {
			case <-done: // checked first: the reader stopped
				return errStopped
			default:
			}
			full <- cur // never blocks for long: the reader returns every batch
			cur = <-free
			return nil
		})
		if cur.n > 0 {
			full <- cur
		}
	}()
	var fnErr error
	for b := range full {
		for i := 0; i < b.n && fnErr == nil; i++ {
			if fnErr = fn(&b.recs[i]); fnErr != nil {
				close(done)
			}
		}
		b.n = 0
		free <- b
	}
	if fnErr != nil {
		return fnErr
	}
	return scanErr
}

// scan calls fn with each record of the log in, in order, on the calling goroutine (see
// read).
func (r *logReader) scan(ctx context.Context, in Input, fn func(*Record) error) error {
	rc, err := in.Open()
	if err != nil {
		return fmt.Errorf("replay: log: %w", err)
	}
	defer rc.Close()
	counted := &countingReader{r: rc}
	br := bufio.NewReaderSize(counted, 256<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("replay: log: gzip: %w", err)
		}
		ahead := readAhead(zr) // decompressed on another core while this one decides
		defer ahead.Close()
		src = ahead
	}
	lines := bufio.NewReaderSize(src, 64<<10)
	var rec Record
	var long []byte // a line longer than the buffer, so far
	tooLong := false
	for {
		chunk, err := lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if tooLong || len(long)+len(chunk) > MaxLineBytes {
				tooLong, long = true, long[:0] // its bytes are dropped
			} else {
				long = append(long, chunk...)
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("replay: log: line %d: %w", r.lines+1, err)
		}
		if len(chunk) == 0 && len(long) == 0 && !tooLong {
			break // the end, after a final newline
		}
		r.lines++
		if r.lines&0xffff == 0 {
			if r.progress != nil {
				r.progress(counted.n, in.Size, r.lines)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if len(long)+len(bytes.TrimRight(chunk, "\r\n")) > MaxLineBytes {
			tooLong = true
		}
		var ferr error
		switch {
		case tooLong:
			ferr = r.bad(fmt.Errorf("longer than %d bytes", MaxLineBytes))
		case len(long) > 0:
			long = append(long, chunk...)
			ferr = r.line(long, &rec, fn)
		default:
			ferr = r.line(chunk, &rec, fn)
		}
		if ferr != nil {
			return ferr
		}
		long, tooLong = long[:0], false
		if err != nil {
			break
		}
	}
	if r.progress != nil {
		r.progress(counted.n, in.Size, r.lines)
	}
	return nil
}

// line reads one line and calls fn with its record.
func (r *logReader) line(b []byte, rec *Record, fn func(*Record) error) error {
	b = bytes.TrimRight(b, "\r\n")
	if len(bytes.TrimSpace(b)) == 0 {
		return nil // a blank line (the last newline of a file) is no request
	}
	line := string(b) // the record's values are substrings of it
	rec.reset()
	rec.Line = r.lines
	var err error
	switch {
	case r.csv != nil && r.csv.columns == nil:
		if err := r.csv.header(line); err != nil {
			return fmt.Errorf("replay: log: line %d: %w", r.lines, err)
		}
		return nil
	case r.csv != nil:
		err = r.csv.parse(line, rec, &r.ts)
	case r.format.json != nil:
		err = r.format.json.parse(line, rec, &r.ts)
	default:
		err = r.format.text.parse(line, rec, &r.ts)
	}
	if err == nil && rec.At == 0 {
		err = errors.New("time: not set")
	}
	if err != nil {
		return r.bad(err)
	}
	return fn(rec)
}

// bad counts a malformed line, or fails with it when strict.
func (r *logReader) bad(err error) error {
	if r.strict {
		return fmt.Errorf("replay: log: %w (--strict: a malformed line is fatal)", &LineError{Line: r.lines, Reason: err.Error()})
	}
	r.malformed.add(r.lines, err)
	return nil
}

// aheadReader reads its source in a goroutine of its own, a few blocks ahead of its reader.
type aheadReader struct {
	blocks chan []byte
	free   chan []byte
	done   chan struct{}
	block  []byte // the block being read, whole
	cur    []byte // what is left of it
	err    error
	errc   chan error
}

const aheadBlock, aheadBlocks = 256 << 10, 4

// readAhead starts reading src ahead. Close stops it.
func readAhead(src io.Reader) *aheadReader {
	a := &aheadReader{blocks: make(chan []byte, aheadBlocks), free: make(chan []byte, aheadBlocks+1),
		done: make(chan struct{}), errc: make(chan error, 1)}
	for range aheadBlocks + 1 {
		a.free <- make([]byte, aheadBlock)
	}
	go func() {
		defer close(a.blocks)
		for {
			var b []byte
			select {
			case b = <-a.free:
			case <-a.done:
				return
			}
			n, err := io.ReadFull(src, b)
			if n > 0 {
				select {
				case a.blocks <- b[:n]:
				case <-a.done:
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					err = io.EOF
				}
				a.errc <- err
				return
			}
		}
	}()
	return a
}

func (a *aheadReader) Read(p []byte) (int, error) {
	if len(a.cur) == 0 {
		if a.block != nil {
			a.free <- a.block // never blocks: free holds every block
			a.block = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		b, ok := <-a.blocks
		if !ok {
			a.err = <-a.errc
			return 0, a.err
		}
		a.block, a.cur = b[:cap(b)], b
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops the reading goroutine.
func (a *aheadReader) Close() error {
	close(a.done)
	return nil
}

package replay

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestReadAheadKeepsEveryByte: the read-ahead of gzip input hands over every byte in order,
// whatever the sizes read, across many blocks.
func TestReadAheadKeepsEveryByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3*aheadBlock*aheadBlocks+12345)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	a := readAhead(bytes.NewReader(data))
	defer a.Close()
	var got []byte
	buf := make([]byte, 3*aheadBlock)
	for {
		n, err := a.Read(buf[:1+rng.IntN(len(buf)-1)])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
	}
}

// TestLongLines: a line longer than MaxLineBytes is malformed, counted with its number; the
// lines around it are read; a line longer than the read buffer but within the bound is read.
func TestLongLines(t *testing.T) {
	ok := `192.0.2.1 - - [10/Oct/2024:13:55:36 +0000] "GET / HTTP/1.1" 200 2 "-" "-"`
	long := `192.0.2.1 - - [10/Oct/2024:13:55:36 +0000] "GET /` + strings.Repeat("a", 200<<10) + ` HTTP/1.1" 200 2 "-" "-"`
	tooLong := strings.Repeat("x", MaxLineBytes+10)
	text := ok + "\n" + long + "\n" + tooLong + "\n" + ok // no final newline
	format, _ := ParseFormat("combined", "")
	r := newLogReader(format, false, nil)
	var targets []int
	in := Input{Name: "t", Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }}
	err := r.read(context.Background(), in, func(rec *Record) error {
		targets = append(targets, len(rec.Target))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 3 || targets[1] != 1+200<<10 || r.malformed.Count != 1 || r.malformed.Lines[0].Line != 3 || r.lines != 4 {
		t.Errorf("targets %v, malformed %+v, lines %d", targets, r.malformed, r.lines)
	}
}

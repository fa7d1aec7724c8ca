// Package wire reads the compact binary encodings Sluice stores (the algorithm states in
// memcached, the quota allocator's client records in Redis).
package wire

import "encoding/binary"

// Reader reads a byte slice front to back, remembering the first failure: a read past the end
// or a malformed varint fails the Reader, and from then on every read returns 0 (check
// Failed once at the end).
type Reader struct {
	b      []byte
	failed bool
}

// NewReader returns a Reader of b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Failed reports whether a read failed.
func (r *Reader) Failed() bool { return r.failed }

// Len is the number of bytes not read yet.
func (r *Reader) Len() int { return len(r.b) }

func (r *Reader) fail() { r.failed, r.b = true, nil }

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Uint64 reads 8 bytes, little-endian.
func (r *Reader) Uint64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// String reads a length-prefixed string (an unsigned varint length, then the bytes) of at
// most limit bytes.
func (r *Reader) String(limit int) string {
	n := r.Uvarint()
	if r.failed || n > uint64(limit) || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

// AppendString appends s length-prefixed, as String reads it.
func AppendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

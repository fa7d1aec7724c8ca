package alloc

import (
	"encoding/binary"
	"errors"
	"math"
)

// errCorrupt is returned by DecodeClient for bytes AppendClient did not write.
var errCorrupt = errors.New("alloc: corrupt client state")

// AppendClient appends a compact binary form of c to dst, for a shared store.
func AppendClient(dst []byte, c *Client) []byte {
	dst = append(dst, 1) // version
	dst = binary.AppendVarint(dst, c.Seen)
	left := byte(0)
	if c.Left {
		left = 1
	}
	dst = append(dst, left)
	dst = binary.AppendUvarint(dst, uint64(len(c.History)))
	for _, s := range c.History {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.Count))
		dst = binary.AppendVarint(dst, s.Elapsed)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Held)))
	for _, a := range c.Held {
		dst = binary.AppendVarint(dst, a.Share)
		dst = binary.AppendVarint(dst, a.Expires)
	}
	return dst
}

// DecodeClient decodes what AppendClient wrote.
func DecodeClient(b []byte) (*Client, error) {
	d := decoder{b: b}
	if d.byte() != 1 {
		return nil, errCorrupt
	}
	c := &Client{Seen: d.varint(), Left: d.byte() == 1}
	n := d.uvarint()
	if n > 1024 {
		return nil, errCorrupt
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		c.History = append(c.History, Sample{Count: math.Float64frombits(d.uint64()), Elapsed: d.varint()})
	}
	n = d.uvarint()
	if n > MaxHeld {
		return nil, errCorrupt
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		c.Held = append(c.Held, Assignment{Share: d.varint(), Expires: d.varint()})
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return c, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.err = errCorrupt
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.err = errCorrupt
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

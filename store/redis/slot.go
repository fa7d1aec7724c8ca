package redis

import "strings"

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its hash tag (the bytes
// between the first '{' and the next '}', when not empty) or else of the whole key, mod 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[i]]
	}
	return crc & 16383
}

// crc16Table is the table of CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the
// checksum of Redis Cluster's key slots.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

package redis_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"net"
	"os"
	"os/exec"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestGeneratedScriptRunsInRedisCLI: a generated script runs as it stands in the tree with
// `redis-cli --eval FILE KEY , ARGS`, and decides: three takes of n on the fixed window admit
// two and deny the third until the window's end.
//
// redis-cli passes each argument as a C string, which ends at its first zero byte, while a
// script's ARGV[1] is ten packed doubles (see lua/prelude.lua). So every double here has no
// zero byte: integers of 2^45 and more (an integer's low mantissa bits are zeros), a tiny
// positive number for the sub-ms clock and the TTL floor (not 0, which would read the server
// clock: so the script runs on the client time given, now_ms) and a tiny negative one for the
// settle's debt bound (not above 0: a plain decision). The fixed window ignores P4 to P6.
func TestGeneratedScriptRunsInRedisCLI(t *testing.T) {
	addr := testenv.RedisAddr(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-cli: %v", err)
		}
		t.Skipf("redis-cli: %v", err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var (
		nowMS = math.Float64frombits(0x4331313131313131) // 4.8e15 ms, an integer
		tiny  = math.Float64frombits(0x0101010101010101) // 7.8e-304
		n     = math.Float64frombits(0x42c1111111111180) // 3.8e13 units, an integer
		limit = math.Float64frombits(0x42d3333333333340) // 8.4e13, in [2n, 3n)
		pms   = math.Float64frombits(0x42d1111111111140) // 7.5e13 ms, the window's length
	)
	var args []byte
	for _, x := range []float64{nowMS, tiny, tiny, n, limit, pms, tiny, tiny, tiny, -tiny} {
		args = binary.LittleEndian.AppendUint64(args, math.Float64bits(x))
	}
	if bytes.IndexByte(args, 0) >= 0 || nowMS != math.Trunc(nowMS) || n != math.Trunc(n) ||
		limit != math.Trunc(limit) || pms != math.Trunc(pms) || limit < 2*n || limit >= 3*n {
		t.Fatal("the arguments are not what the comments say")
	}
	key := testPrefix(t, standalone(t)) + "{cli}"
	windowEnd := (math.Floor(nowMS/pms) + 1) * pms
	reset := (windowEnd - nowMS) * 1e6 // ns
	for i, want := range [][5]float64{
		{1, limit - n, 0, reset, 0},
		{1, limit - 2*n, 0, reset, 0},
		{0, limit - 2*n, reset, reset, 0},
	} {
		out, err := exec.Command(cli, "-h", host, "-p", port, "--eval", "lua/gen/fixed_window.lua", key, ",", string(args)).Output()
		if err != nil {
			t.Fatalf("redis-cli --eval: %v: %s", err, out)
		}
		reply, ok := bytes.CutSuffix(out, []byte("\n"))
		if !ok || len(reply) != 40 {
			t.Fatalf("take %d: redis-cli printed %q, want a reply of 40 bytes and a newline", i+1, out)
		}
		var got [5]float64
		for j := range got {
			got[j] = math.Float64frombits(binary.LittleEndian.Uint64(reply[8*j:]))
		}
		if got != want {
			t.Errorf("take %d: allowed, remaining, retry, reset, delay = %v, want %v", i+1, got, want)
		}
	}
}

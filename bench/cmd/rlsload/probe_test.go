package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestParseProcStat(t *testing.T) {
	// Fields 14 and 15 (utime, stime) are 250 and 50 ticks; the name holds spaces and ')'.
	stat := "4242 (sluice (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 1000000 500"
	got, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "4242 sluice S 1", "4242 (sluice) S 1 2 3", "4242 (s) S 1 2 3 4 5 6 7 8 9 10 x 50 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestProcessCPU reads this process's CPU time while it spins: it must grow.
func TestProcessCPU(t *testing.T) {
	start, err := processCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		now, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now >= start+2*time.Second/clockTicks {
			return
		}
	}
	t.Fatalf("CPU time did not grow over 30 s of spinning (%d)", x)
}

const infoFixture = "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:0.000000\r\n\r\n" +
	"# Commandstats\r\ncmdstat_evalsha:calls=10,usec=500,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_hset:calls=80,usec=160,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_config|resetstat:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseRedisInfo(t *testing.T) {
	st, err := parseRedisInfo(infoFixture)
	if err != nil {
		t.Fatal(err)
	}
	if st.cpu != 3750*time.Millisecond {
		t.Errorf("cpu %v, want 3.75s", st.cpu)
	}
	if st.cmds["evalsha"] != (cmdStat{10, 500}) || st.cmds["config|resetstat"] != (cmdStat{1, 9}) {
		t.Errorf("commands %v", st.cmds)
	}
	if _, err := parseRedisInfo("# Commandstats\r\ncmdstat_get:calls=1,usec=1\r\n"); err == nil {
		t.Error("INFO without CPU: no error")
	}
}

func TestDiffRedis(t *testing.T) {
	before, _ := parseRedisInfo(infoFixture)
	after, _ := parseRedisInfo(strings.NewReplacer(
		"used_cpu_user:2.250000", "used_cpu_user:2.750000",
		"evalsha:calls=10,usec=500", "evalsha:calls=14,usec=700",
		"hset:calls=80,usec=160", "hset:calls=112,usec=224",
		"info:calls=7,usec=70", "info:calls=9,usec=90",
	).Replace(infoFixture) + "cmdstat_eval:calls=1,usec=30\r\n")
	d := diffRedis(before, after)
	if d.cpu != 500*time.Millisecond {
		t.Errorf("cpu %v, want 500ms", d.cpu)
	}
	// INFO is rlsload's own; eval (new since before) counts from zero.
	if d.scriptCalls != 5 || d.scriptUsec != 230 || d.otherCalls != 32 || d.otherUsec != 64 {
		t.Errorf("delta %+v", d)
	}
	want := []string{"evalsha 4 calls 200 usec", "hset 32 calls 64 usec", "eval 1 calls 30 usec"}
	if strings.Join(d.topUsec, ";") != strings.Join(want, ";") {
		t.Errorf("top %q, want %q", d.topUsec, want)
	}
}

// TestRedisProbe reads a real Redis: a script call counts as a script, the command it calls
// inside as another command (Redis counts both).
func TestRedisProbe(t *testing.T) {
	addr := testenv.RedisAddr(t)
	ctx := context.Background()
	p := newRedisProbe(addr)
	defer p.close()
	before, err := p.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.client.Eval(ctx, "return redis.call('incr', KEYS[1])", []string{"rlsload:probe-test"}).Err(); err != nil {
		t.Fatal(err)
	}
	p.client.Del(ctx, "rlsload:probe-test")
	after, err := p.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Other tests may share this Redis: at least our commands are there.
	d := diffRedis(before, after)
	if d.scriptCalls < 1 || d.otherCalls < 2 || d.cpu < 0 {
		t.Fatalf("delta %+v: want at least 1 script call and 2 other commands (incr, del)", d)
	}
}

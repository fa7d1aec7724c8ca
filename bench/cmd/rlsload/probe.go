package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in /proc/PID/stat: 100 on every
// architecture Go runs Linux on.
const clockTicks = 100

// processCPU is the CPU time (user + system, every thread) process pid has used so far.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("rlsload: server CPU of pid %d: %w", pid, err)
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime + stime from the text of /proc/PID/stat. The command name, in
// parentheses, may hold spaces and parentheses itself, so fields are counted from the last ')'.
func parseProcStat(s string) (time.Duration, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("rlsload: /proc stat: no ')' in %q", s)
	}
	// Fields from 3 (state) on; utime and stime are fields 14 and 15.
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("rlsload: /proc stat: %d fields after the name, want at least 13", len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rlsload: /proc stat: utime/stime %q: %w", v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64
}

// redisStats is what one INFO cpu + commandstats said.
type redisStats struct {
	cpu time.Duration // used_cpu_user + used_cpu_sys
	// cmds by command name as Redis writes it (evalsha, incrby, config|resetstat, ...).
	cmds map[string]cmdStat
}

// scriptCommand reports whether a command runs a script or function.
func scriptCommand(name string) bool {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// ownCommand reports whether rlsload itself sends the command (so it is no contender's).
func ownCommand(name string) bool {
	return name == "info" || name == "flushall" || name == "hello" || strings.HasPrefix(name, "client|")
}

// parseRedisInfo reads INFO's text (sections cpu and commandstats).
func parseRedisInfo(text string) (redisStats, error) {
	st := redisStats{cmds: map[string]cmdStat{}}
	var user, sys float64
	var haveUser, haveSys bool
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return st, fmt.Errorf("rlsload: INFO %s: %w", k, err)
			}
			if k == "used_cpu_user" {
				user, haveUser = f, true
			} else {
				sys, haveSys = f, true
			}
		case strings.HasPrefix(k, "cmdstat_"):
			var c cmdStat
			for _, kv := range strings.Split(v, ",") {
				name, val, _ := strings.Cut(kv, "=")
				switch name {
				case "calls":
					c.calls, _ = strconv.ParseInt(val, 10, 64)
				case "usec":
					c.usec, _ = strconv.ParseInt(val, 10, 64)
				}
			}
			st.cmds[strings.TrimPrefix(k, "cmdstat_")] = c
		}
	}
	if !haveUser || !haveSys {
		return st, fmt.Errorf("rlsload: INFO has no used_cpu_user/used_cpu_sys")
	}
	st.cpu = time.Duration((user + sys) * float64(time.Second))
	return st, nil
}

// redisDelta is what Redis did between two snapshots, apart from rlsload's own commands.
type redisDelta struct {
	cpu                     time.Duration
	scriptCalls, scriptUsec int64
	otherCalls, otherUsec   int64
	topUsec                 []string // the busiest commands, "name calls/usec"
}

func diffRedis(before, after redisStats) redisDelta {
	d := redisDelta{cpu: after.cpu - before.cpu}
	type row struct {
		name string
		cmdStat
	}
	var rows []row
	for name, a := range after.cmds {
		if ownCommand(name) {
			continue
		}
		b := before.cmds[name]
		c := cmdStat{calls: a.calls - b.calls, usec: a.usec - b.usec}
		if c.calls == 0 {
			continue
		}
		if scriptCommand(name) {
			d.scriptCalls += c.calls
			d.scriptUsec += c.usec
		} else {
			d.otherCalls += c.calls
			d.otherUsec += c.usec
		}
		rows = append(rows, row{name, c})
	}
	// Busiest first; ties by name, so the output is stable.
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(b.usec, a.usec), strings.Compare(a.name, b.name))
	})
	for _, r := range rows[:min(len(rows), 4)] {
		d.topUsec = append(d.topUsec, fmt.Sprintf("%s %d calls %d usec", r.name, r.calls, r.usec))
	}
	return d
}

// redisProbe reads a Redis server's INFO.
type redisProbe struct {
	client *goredis.Client
}

func newRedisProbe(addr string) *redisProbe {
	return &redisProbe{client: goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 1, DisableIdentity: true})}
}

func (p *redisProbe) snapshot(ctx context.Context) (redisStats, error) {
	text, err := p.client.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("rlsload: Redis INFO: %w", err)
	}
	return parseRedisInfo(text)
}

// flush empties the Redis, so every run starts from the same state.
func (p *redisProbe) flush(ctx context.Context) error {
	if err := p.client.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("rlsload: Redis FLUSHALL: %w", err)
	}
	return nil
}

func (p *redisProbe) close() { p.client.Close() }

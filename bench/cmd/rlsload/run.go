package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Run is one measured run: a JSON line of rlsload run's output file. Per-request figures are
// over the requests of the measured window (the warm-up excluded); a figure not measured (no
// -pid, no -redis) is absent.
type Run struct {
	Contender string  `json:"contender"`
	Scenario  string  `json:"scenario"`
	Round     int     `json:"round"`
	Callers   int     `json:"callers"`
	Users     int     `json:"users"` // 0: the hot key
	Seconds   float64 `json:"seconds"`
	LoadAvg   string  `json:"loadavg"` // /proc/loadavg's 1, 5 and 15 minute averages at the start

	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	OverLimit  int64   `json:"over_limit"`
	PerSecond  float64 `json:"requests_per_second"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`

	ServerCPUus *float64 `json:"server_cpu_us_per_request,omitempty"`
	RedisCPUus  *float64 `json:"redis_cpu_us_per_request,omitempty"`
	// Commandstats, per request: scripts (EVAL, EVALSHA, FCALL and their _RO forms) and
	// every other command. Redis also counts the commands a script calls, so for a
	// contender that sends scripts, "other" is mostly what its scripts did inside (and
	// already part of ScriptUsec).
	ScriptCalls *float64 `json:"script_calls_per_request,omitempty"`
	ScriptUsec  *float64 `json:"script_usec_per_request,omitempty"`
	OtherCalls  *float64 `json:"other_commands_per_request,omitempty"`
	OtherUsec   *float64 `json:"other_usec_per_request,omitempty"`
	TopCommands []string `json:"top_commands,omitempty"`
}

// runConfig is rlsload run's flags.
type runConfig struct {
	addr, redis, contender, scenario, out, domain string
	pid, callers, users, round                    int
	warmup, duration, ready, callTimeout          time.Duration
	flush                                         bool
}

func parseRunFlags(args []string) (runConfig, error) {
	var c runConfig
	fs := flag.NewFlagSet("rlsload run", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "", "the RLS server's gRPC address, host:port (required)")
	fs.IntVar(&c.pid, "pid", 0, "the server's process id, for its CPU time (0: not measured)")
	fs.StringVar(&c.redis, "redis", "", "host:port of the Redis the server uses, for its INFO (empty: not measured)")
	fs.BoolVar(&c.flush, "flush", false, "FLUSHALL the -redis before the run")
	fs.StringVar(&c.contender, "contender", "", "the server's name in the results (required)")
	fs.StringVar(&c.scenario, "scenario", "", "the scenario's name in the results (default: from -users and -callers)")
	fs.IntVar(&c.round, "round", 1, "round number, for the results")
	fs.StringVar(&c.domain, "domain", "bench", "RLS domain asked")
	fs.IntVar(&c.callers, "callers", 64, "concurrent closed-loop callers, one gRPC connection each")
	fs.IntVar(&c.users, "users", 10000, "distinct values of descriptor key \"user\"; 0: every request asks for hot=hot")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "load before the measured window, not counted")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of the measured window")
	fs.DurationVar(&c.ready, "ready-timeout", 30*time.Second, "how long to wait for the server's first successful answer")
	fs.DurationVar(&c.callTimeout, "call-timeout", 5*time.Second, "bound on each call; a call over it counts as an error")
	fs.StringVar(&c.out, "out", "", "append the run as a JSON line to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var errs []error
	if c.addr == "" {
		errs = append(errs, errors.New("rlsload run: -addr is required"))
	}
	if c.contender == "" {
		errs = append(errs, errors.New("rlsload run: -contender is required"))
	}
	if c.callers < 1 {
		errs = append(errs, fmt.Errorf("rlsload run: -callers must be at least 1, got %d", c.callers))
	}
	if c.users < 0 {
		errs = append(errs, fmt.Errorf("rlsload run: -users must be 0 (the hot key) or more, got %d", c.users))
	}
	if c.duration <= 0 {
		errs = append(errs, fmt.Errorf("rlsload run: -duration must be positive, got %v", c.duration))
	}
	if c.warmup < 0 {
		errs = append(errs, fmt.Errorf("rlsload run: -warmup must not be negative, got %v", c.warmup))
	}
	if c.flush && c.redis == "" {
		errs = append(errs, errors.New("rlsload run: -flush needs -redis"))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("rlsload run: unexpected arguments %q", fs.Args()))
	}
	if c.scenario == "" {
		c.scenario = fmt.Sprintf("%d callers, %d users", c.callers, c.users)
		if c.users == 0 {
			c.scenario = fmt.Sprintf("%d callers, hot key", c.callers)
		}
	}
	return c, errors.Join(errs...)
}

func runCmd(args []string) error {
	c, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	r, err := measure(context.Background(), c)
	if err != nil {
		return err
	}
	printRun(os.Stdout, r)
	if c.out != "" {
		f, err := os.OpenFile(c.out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("rlsload: -out: %w", err)
		}
		defer f.Close()
		b, _ := json.Marshal(r)
		if _, err := f.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("rlsload: -out: %w", err)
		}
	}
	return nil
}

// measure runs the warm-up and the measured window, with the CPU and Redis snapshots just
// around the window.
func measure(ctx context.Context, c runConfig) (Run, error) {
	r := Run{Contender: c.contender, Scenario: c.scenario, Round: c.round, Callers: c.callers, Users: c.users, LoadAvg: loadAvg()}
	var probe *redisProbe
	if c.redis != "" {
		probe = newRedisProbe(c.redis)
		defer probe.close()
		if c.flush {
			if err := probe.flush(ctx); err != nil {
				return r, err
			}
		}
	}
	cs, err := dialCallers(c.addr, workload{domain: c.domain, callers: c.callers, users: c.users})
	if err != nil {
		return r, err
	}
	defer cs.close()
	if err := cs.waitReady(c.ready); err != nil {
		return r, fmt.Errorf("%w (server %s at %s)", err, c.contender, c.addr)
	}
	if c.warmup > 0 {
		cs.run(c.warmup, c.callTimeout)
	}

	var cpu0 time.Duration
	var rs0 redisStats
	if c.pid != 0 {
		if cpu0, err = processCPU(c.pid); err != nil {
			return r, err
		}
	}
	if probe != nil {
		if rs0, err = probe.snapshot(ctx); err != nil {
			return r, err
		}
	}
	res := cs.run(c.duration, c.callTimeout)
	if c.pid != 0 {
		cpu1, err := processCPU(c.pid)
		if err != nil {
			return r, err
		}
		r.ServerCPUus = perRequest(float64((cpu1 - cpu0).Microseconds()), res.requests)
	}
	if probe != nil {
		rs1, err := probe.snapshot(ctx)
		if err != nil {
			return r, err
		}
		d := diffRedis(rs0, rs1)
		r.RedisCPUus = perRequest(float64(d.cpu.Microseconds()), res.requests)
		r.ScriptCalls = perRequest(float64(d.scriptCalls), res.requests)
		r.ScriptUsec = perRequest(float64(d.scriptUsec), res.requests)
		r.OtherCalls = perRequest(float64(d.otherCalls), res.requests)
		r.OtherUsec = perRequest(float64(d.otherUsec), res.requests)
		r.TopCommands = d.topUsec
	}
	r.Seconds = res.elapsed.Seconds()
	r.Requests, r.Errors, r.OverLimit = res.requests, res.errors, res.overLimit
	if res.firstErr != nil {
		r.FirstError = res.firstErr.Error()
	}
	if r.Seconds > 0 {
		r.PerSecond = float64(res.requests) / r.Seconds
	}
	r.P50us = float64(res.p50) / float64(time.Microsecond)
	r.P99us = float64(res.p99) / float64(time.Microsecond)
	return r, nil
}

// perRequest is v/requests, nil when there were no requests.
func perRequest(v float64, requests int64) *float64 {
	if requests == 0 {
		return nil
	}
	x := v / float64(requests)
	return &x
}

// loadAvg is /proc/loadavg's first three fields, or "?" where there is none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printRun writes a run as one readable line (and its busiest Redis commands).
func printRun(w io.Writer, r Run) {
	fmt.Fprintf(w, "%s, %s, round %d: %d requests in %.1f s (%.0f/s), p50 %.0f µs p99 %.0f µs, %d errors, %s%% over limit; server CPU %s µs/req, Redis CPU %s µs/req, scripts %s calls/req; load %s\n",
		r.Contender, r.Scenario, r.Round, r.Requests, r.Seconds, r.PerSecond, r.P50us, r.P99us, r.Errors,
		pct(r.OverLimit, r.Requests), num(r.ServerCPUus, 1), num(r.RedisCPUus, 2), num(r.ScriptCalls, 3), r.LoadAvg)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error: %s\n", r.FirstError)
	}
	if len(r.TopCommands) > 0 {
		fmt.Fprintf(w, "  Redis commands: %s\n", strings.Join(r.TopCommands, "; "))
	}
}

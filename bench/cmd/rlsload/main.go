// Command rlsload drives an Envoy rate limit service (envoy.service.ratelimit.v3) with
// closed-loop gRPC callers and measures what each request cost: the server process's CPU
// (/proc/PID/stat), and the Redis server's CPU and commands (INFO cpu and commandstats). It
// is the load generator of bench/headtohead.sh, which documents the measures; any RLS server
// can be measured, Sluice's or another.
//
//	rlsload run -addr 127.0.0.1:27510 -pid PID -redis 127.0.0.1:27501 -contender sluice \
//	    -scenario users -callers 64 -users 10000 -duration 10s -out results.jsonl
//	rlsload table results.jsonl          # markdown tables of every run in the file
//
// run appends one JSON line per run to -out and prints it readably on standard output.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "table":
		err = tableCmd(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rlsload run [flags] | rlsload table FILE.jsonl ... (rlsload run -h: the flags)")
	os.Exit(2)
}

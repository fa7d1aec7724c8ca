#!/usr/bin/env bash
# Redis server CPU per decision (INFO commandstats, after CONFIG RESETSTAT) for Sluice's scripts
# and the anchors, in one session on one redis-server:
#   - redis-benchmark -c 4 -P 8 EVALSHA of `return 1` and of the plain HMGET/HSET/PEXPIRE
#     token bucket (bench/redis_test.go, plainBucketLua), 10k keys: usec_per_call;
#   - single_call: BenchmarkRedisCPUReplay (the exact single-key EVALSHA the store sends,
#     captured by a hook, replayed like redis-benchmark: 4 connections, pipelines of 8, 1,000
#     keys; the same anchors): usec per call = per decision, each call deciding one key;
#     replay_batch: the store's batched script call rebuilt with 8 and 32 keys, replayed alike:
#     usec per call over the keys it decides;
#   - per_decision: BenchmarkRedisCPU (decisions through the store from 4 and from 64
#     goroutines: every algorithm with the server clock and with the client clock, the same
#     anchors, INCR), where the Go client shares the cores with the server: the script calls'
#     total usec over the decisions made (the store batches concurrent decisions into one
#     script call, so a call may decide many keys); decisions_per_call: how many on average;
#   - process_cpu / process_cmd_usec: BenchmarkRedisCPUProcess (bench/redis_cpu_process_test.go:
#     Redis's whole process CPU per decision, INFO cpu used_cpu_user + used_cpu_sys, and the
#     commandstats usec of the commands sent, at 1 and 64 callers (SLUICE_BENCH_CALLERS), for
#     the store and envoyproxy/ratelimit's pipelined INCRBY+EXPIRE);
#   - with BEFORE=<commit>, BenchmarkRedisCPU again on that commit's store (the current
#     benchmark file copied into an archive of it), for a before/after comparison.
# Rounds alternate between the contenders; the summary gives the minimum and the median over
# rounds: on a shared machine other jobs only ever add time, so the minimum is the closest to
# the scripts' own cost.
#
# Usage: SLUICE_REDIS_ADDR=127.0.0.1:6379 [ROUNDS=5] [BEFORE=604dc5a] \
#        [SLUICE_BENCH_CPU_WORKERS=4,64] bench/redis_cpu.sh
set -euo pipefail
cd "$(dirname "$0")"
. ./minmed.sh
ADDR=${SLUICE_REDIS_ADDR:?set SLUICE_REDIS_ADDR to a redis-server host:port}
HOST=${ADDR%:*}
PORT=${ADDR##*:}
ROUNDS=${ROUNDS:-5}
OUT=$(mktemp)
OLD=""
cleanup() { rm -f "$OUT"; [ -z "$OLD" ] || rm -rf "$OLD"; }
trap cleanup EXIT

cli() { redis-cli -h "$HOST" -p "$PORT" "$@"; }
usec() { cli INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'; }

if [ -n "${BEFORE:-}" ]; then
	OLD=$(mktemp -d)
	git -C .. archive "$BEFORE" | tar -x -C "$OLD"
	cp redis_test.go redis_cpu_test.go redis_cpu_process_test.go "$OLD/bench/"
fi

plain=$(sed -n '/^const plainBucketLua = `/,/^`/p' redis_test.go | sed '1d;$d')
ret1_sha=$(cli SCRIPT LOAD "return 1")
plain_sha=$(cli SCRIPT LOAD "$plain")
now=$(date +%s%3N)

for r in $(seq 1 "$ROUNDS"); do
	cli CONFIG RESETSTAT >/dev/null
	redis-benchmark -h "$HOST" -p "$PORT" -n 100000 -c 4 -P 8 -r 10000 -q \
		EVALSHA "$ret1_sha" 1 rb:ret1:__rand_int__ >/dev/null 2>&1
	echo "redis-benchmark/return_1 $(usec)" >>"$OUT"
	cli CONFIG RESETSTAT >/dev/null
	redis-benchmark -h "$HOST" -p "$PORT" -n 100000 -c 4 -P 8 -r 10000 -q \
		EVALSHA "$plain_sha" 1 rb:plain:__rand_int__ 1000000 1000000 "$now" 1 >/dev/null 2>&1
	echo "redis-benchmark/plain_hmget_hset_pexpire $(usec)" >>"$OUT"
	for tree in after before; do
		dir=.
		if [ "$tree" = before ]; then
			[ -n "$OLD" ] || continue
			dir=$OLD/bench
		fi
		(cd "$dir" && go test -run '^$' -bench 'RedisCPU' -benchtime 1x 2>/dev/null) |
			awk -v t="$tree" '/^BenchmarkRedisCPU/ {
				name = $1; sub(/-[0-9]+$/, "", name)
				kind = "per_decision"
				if (name ~ /^BenchmarkRedisCPUReplay\//) kind = "single_call"
				if (name ~ /\/batch_of_[0-9]+$/) kind = "replay_batch"
				if (name ~ /^BenchmarkRedisCPUProcess\//) kind = "process"
				sub(/^BenchmarkRedisCPU(Replay|Process)?\//, "", name)
				for (i = 3; i <= NF; i++) {
					if (kind == "process") {
						if ($i == "redis-cpu-µs/decision") print t ":process_cpu:" name, $(i - 1)
						if ($i == "cmd-µs/decision") print t ":process_cmd_usec:" name, $(i - 1)
						continue
					}
					if ($i == "redis-µs/call" || $i == "redis-µs/decision") print t ":" kind ":" name, $(i - 1)
					if ($i == "decisions/call" && kind == "per_decision") print t ":decisions_per_call:" name, $(i - 1)
				}
			}' >>"$OUT"
	done
done

echo "# $(date -u +%FT%TZ), $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# contender: min / median usec per decision (all rounds; decisions_per_call: decisions per script call)"
minmed "$OUT" 72

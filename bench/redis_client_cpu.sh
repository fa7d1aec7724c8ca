#!/usr/bin/env bash
# The client's and the server's CPU per decision on Redis (BenchmarkRedisClientCPU in
# redis_client_cpu_test.go), for this tree's store and, with BEFORE=<commit>, that commit's
# (this benchmark file copied into an archive of it, which must have the bench helpers it
# uses: main from the merge of issue 26's item 2 on), rounds alternating between the
# two binaries, both against one redis-server. The summary gives, per contender and metric,
# the minimum and the median over rounds (on a shared machine other jobs only ever add time)
# and every round's figure, with the load average.
#
# Usage: SLUICE_REDIS_ADDR=127.0.0.1:6379 [ROUNDS=3] [BEFORE=main] [BENCHTIME=20000x] \
#        [SLUICE_BENCH_CONTENDERS=store/,rueidis/] bench/redis_client_cpu.sh
set -euo pipefail
cd "$(dirname "$0")"
. ./minmed.sh
: "${SLUICE_REDIS_ADDR:?set SLUICE_REDIS_ADDR to a redis-server host:port}"
ROUNDS=${ROUNDS:-3}
BENCHTIME=${BENCHTIME:-20000x}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

go test -c -o "$WORK/after.test" .
trees=(after)
if [ -n "${BEFORE:-}" ]; then
	mkdir "$WORK/old"
	git -C .. archive "$BEFORE" | tar -x -C "$WORK/old"
	cp redis_client_cpu_test.go "$WORK/old/bench/"
	rueidis=$(go list -m -f '{{.Path}}@{{.Version}}' github.com/redis/rueidis)
	(cd "$WORK/old/bench" && go get "$rueidis" 2>/dev/null && go test -c -o "$WORK/before.test" .)
	trees=(before after)
fi
loads=()
for r in $(seq 1 "$ROUNDS"); do
	for tree in "${trees[@]}"; do
		loads+=("$(cut -d' ' -f1 /proc/loadavg)")
		{ "$WORK/$tree.test" -test.run '^$' -test.bench 'RedisClientCPU' -test.benchtime "$BENCHTIME" 2>&1 || true; } |
			tee -a "$WORK/log" |
			awk -v t="$tree" '/^BenchmarkRedisClientCPU\// {
				name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkRedisClientCPU\//, "", name)
				for (i = 3; i <= NF; i++)
					if ($i ~ /µs\/op$|^ns\/op$|^decisions\/call$/) print t ":" name ":" $i, $(i - 1)
			}' >>"$WORK/out"
	done
done

grep -h -A3 -- '--- FAIL' "$WORK/log" >&2 || true
echo "# $(date -u +%FT%TZ), $ROUNDS rounds x ${#trees[@]} trees, benchtime $BENCHTIME, load average at each run: ${loads[*]}"
echo "# tree:contender/algorithm/goroutines:metric   min / median   (each round)"
minmed "$WORK/out" 64

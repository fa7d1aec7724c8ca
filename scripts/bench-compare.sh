#!/usr/bin/env bash
# Before/after performance comparison of two revisions, measured on one machine in one sitting,
# interleaved (issue 20's "no performance regression"; docs/BENCHMARKS.md, "Issue 20").
#
# It checks out OLD_REV and NEW_REV in temporary git worktrees under /tmp, builds once per
# revision the bench/ module's test binary, the httplimit package's test binary and
# `sluice` (cmd/sluice), and the load generator once (server's TestLoadExternal, the one
# bench/server_load.sh drives, from LOAD_REV: the same load for both revisions). It starts its
# own redis-server on 127.0.0.1 (a free port) and then, round after round, runs each
# measurement for OLD then for NEW:
#
#   memory      bench BenchmarkMemory (Limiter.AllowN on the memory store, with the peers
#               x/time/rate and uber-go/ratelimit for scale), -benchmem: ns/op, allocs/op;
#   redis       bench BenchmarkRedisThroughput/goroutines=64 (every contender): decisions/s;
#   middleware  bench BenchmarkHTTPMiddleware (bare, the sluice rows and sethvargo/go-limiter,
#               the best peer, for scale): cpu-ns/op (process CPU per request), ns/op,
#               allocs/op, and each row's overhead over `bare`; plus every benchmark of the
#               httplimit package's own test binary;
#   serve       `sluice serve` on the memory store and on Redis under the load generator
#               (64 gRPC connections, closed loop, 1,024 client addresses at 50/s each):
#               server CPU per request = the server process's utime + stime (/proc/PID/stat)
#               over the ShouldRateLimit calls it served (its
#               sluice_request_duration_seconds_count{transport="grpc"}), both read before
#               and after the load run (warm-up second included).
#
# Raw outputs go to RESULTS (default /tmp/sluice-bench-compare.<time>): one file per run, and
# samples.tsv (measurement, revision, round, benchmark, unit, value). At the end it prints one
# markdown table per measurement: medians over the rounds, old, new, new/old, allocations, and
# each side's min-max over the rounds. A revision where a benchmark is missing or fails shows
# "—" in that cell; the failure is in the run's raw file.
#
# Usage: scripts/bench-compare.sh OLD_REV NEW_REV
#   ROUNDS=3            rounds (each: every measurement, OLD then NEW)
#   QUICK=1             a smoke run of the harness, about 2 minutes once built (2 rounds,
#                       50-100 ms benchmarks, 1 s loads): its figures mean nothing
#   ONLY='memory redis middleware serve'   the measurements to run
#   MEM_BENCHTIME=500ms REDIS_BENCHTIME=1s MW_BENCHTIME=500ms
#   SERVE_SECONDS=8     the measured load per run, after the load generator's 1 s warm-up
#                       (it caps this at 10)
#   LOAD_REV=OLD_REV    the revision the load generator is built from
#   PORT_BASE=23600 PORT_SPAN=20   where free loopback ports are looked for
#   RESULTS=dir         where raw outputs and samples.tsv go
#
# Default run (3 rounds): about 6 minutes of measuring (benchmark times and loads are
# wall-clock bounded, so other jobs do not stretch it) plus the builds, 2-4 minutes when the
# Go build cache holds the dependencies (builds use -trimpath, so unchanged packages are shared
# between the two revisions); about 10 minutes in all on the 2-core VM. A cold cache on a busy
# machine can add 15 minutes of building. Every run is bounded (RUN_TIMEOUT=300 s). Everything
# listens on 127.0.0.1 only; the script stops what it started (by PID) and removes its
# worktrees at exit.
set -euo pipefail

if [ $# -ne 2 ]; then
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi

log() { printf '==> %s\n' "$*" >&2; }

REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
OLD=$(git -C "$REPO" rev-parse --verify "$1^{commit}")
NEW=$(git -C "$REPO" rev-parse --verify "$2^{commit}")
LOADREV=$(git -C "$REPO" rev-parse --verify "${LOAD_REV:-$OLD}^{commit}")

if [ "${QUICK:-0}" = 1 ]; then
	: "${ROUNDS:=2}" "${MEM_BENCHTIME:=50ms}" "${REDIS_BENCHTIME:=100ms}" "${MW_BENCHTIME:=50ms}" "${SERVE_SECONDS:=1}"
fi
ROUNDS=${ROUNDS:-3}
MEM_BENCHTIME=${MEM_BENCHTIME:-500ms}
REDIS_BENCHTIME=${REDIS_BENCHTIME:-1s}
MW_BENCHTIME=${MW_BENCHTIME:-500ms}
SERVE_SECONDS=${SERVE_SECONDS:-8}
ONLY=${ONLY:-memory redis middleware serve}
PORT_BASE=${PORT_BASE:-23600}
PORT_SPAN=${PORT_SPAN:-20}
RESULTS=${RESULTS:-/tmp/sluice-bench-compare.$(date -u +%Y%m%dT%H%M%SZ)}
RUN_TIMEOUT=${RUN_TIMEOUT:-300} # seconds, the bound on any one benchmark or load run

mkdir -p "$RESULTS"
WORK=$(mktemp -d /tmp/sluice-bench-compare-work.XXXXXX)
SAMPLES=$RESULTS/samples.tsv
: >"$SAMPLES"
WORKTREES=()
REDIS_PID=
SERVER_PID=

cleanup() {
	local rc=$?
	trap '' INT TERM # a second signal must not cut the cleanup short
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	if [ -n "$REDIS_PID" ]; then
		kill "$REDIS_PID" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.1; done
	fi
	for wt in "${WORKTREES[@]}"; do
		git -C "$REPO" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
	done
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wants() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# free_port VAR sets VAR to a port in PORT_BASE..PORT_BASE+PORT_SPAN-1 that nothing listens
# on and that this run has not taken yet (not in a subshell: TAKEN must keep the ports).
TAKEN=" "
free_port() {
	local p
	for ((p = PORT_BASE; p < PORT_BASE + PORT_SPAN; p++)); do
		case $TAKEN in *" $p "*) continue ;; esac
		if [ -z "$(ss -Hltn "sport = :$p")" ]; then
			TAKEN="$TAKEN$p "
			printf -v "$1" '%s' "$p"
			return 0
		fi
	done
	log "no free port in $PORT_BASE..$((PORT_BASE + PORT_SPAN - 1))"
	return 1
}

wait_port() { # port
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	return 1
}

# --- build --------------------------------------------------------------------------------
# checkout REV NAME: a detached worktree of REV at $WORK/NAME.
checkout() {
	git -C "$REPO" worktree add --detach --quiet "$WORK/$2" "$1"
	WORKTREES+=("$WORK/$2")
}

# build NAME: the three binaries of one revision into $WORK/bin/NAME.*; a binary that does not
# build is left out (its measurements show "—") and the error kept in RESULTS.
build() {
	local dir=$WORK/$1 out=$WORK/bin/$1
	(cd "$dir/bench" && go test -c -trimpath -o "$out.bench.test" .) >"$RESULTS/build.$1.bench.txt" 2>&1 ||
		log "$1: bench test binary did not build (see $RESULTS/build.$1.bench.txt)"
	(cd "$dir" && go test -c -trimpath -o "$out.httplimit.test" ./httplimit/) >"$RESULTS/build.$1.httplimit.txt" 2>&1 ||
		log "$1: httplimit test binary did not build (see $RESULTS/build.$1.httplimit.txt)"
	(cd "$dir" && go build -trimpath -o "$out.sluice" ./cmd/sluice) >"$RESULTS/build.$1.sluice.txt" 2>&1 ||
		log "$1: sluice did not build (see $RESULTS/build.$1.sluice.txt)"
}

# build_load: the load generator, the test binary of the package that has TestLoadExternal
# (server/ on main), from LOAD_REV.
build_load() {
	local dir=$WORK/old pkg
	if [ "$LOADREV" != "$OLD" ]; then
		dir=$WORK/load
		checkout "$LOADREV" load
	fi
	pkg=$(cd "$dir" && grep -l --include='*_test.go' -r '^func TestLoadExternal(' . | head -n1 | xargs -r dirname)
	if [ -z "$pkg" ]; then
		log "no TestLoadExternal at $LOADREV: the serve measurement is skipped"
		return 0
	fi
	(cd "$dir" && go test -c -trimpath -o "$WORK/bin/load.test" "$pkg") >"$RESULTS/build.load.txt" 2>&1 ||
		log "the load generator did not build (see $RESULTS/build.load.txt)"
}

# --- measurements -------------------------------------------------------------------------
# samples MEASUREMENT REV ROUND: benchmark lines on stdin -> samples.tsv (name without
# "Benchmark" and the -GOMAXPROCS suffix, one row per value/unit pair).
samples() {
	awk -v m="$1" -v rev="$2" -v round="$3" 'BEGIN { OFS = "\t" }
		/^Benchmark[^ \t]*[ \t]+[0-9]+[ \t]/ {
			name = $1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
			for (i = 3; i + 1 <= NF; i += 2) print m, rev, round, name, $(i + 1), $i
		}' >>"$SAMPLES"
}

# overhead REV ROUND: each HTTPMiddleware row minus `bare` of the same case and run.
overhead() {
	awk -F'\t' -v rev="$1" -v round="$2" 'BEGIN { OFS = "\t" }
		$1 == "middleware" && $2 == rev && $3 == round && $4 ~ /^HTTPMiddleware\// && ($5 == "cpu-ns/op" || $5 == "ns/op") {
			n = split($4, p, "/"); c = p[2]; who = p[3]
			if (who == "bare") bare[c, $5] = $6
			else { k = c "/" who; if (!(k in seen)) { seen[k] = 1; order[++rows] = k; cs[k] = c }; v[k, $5] = $6 }
		}
		END {
			for (i = 1; i <= rows; i++) {
				k = order[i]
				if ((cs[k], "cpu-ns/op") in bare && (k, "cpu-ns/op") in v) print "mw_overhead", rev, round, k, "cpu-ns/op", v[k, "cpu-ns/op"] - bare[cs[k], "cpu-ns/op"]
				if ((cs[k], "ns/op") in bare && (k, "ns/op") in v) print "mw_overhead", rev, round, k, "ns/op", v[k, "ns/op"] - bare[cs[k], "ns/op"]
			}
		}' "$SAMPLES" >>"$SAMPLES.tmp"
	cat "$SAMPLES.tmp" >>"$SAMPLES"
	rm -f "$SAMPLES.tmp"
}

# gobench REV MEASUREMENT ROUND BINARY DIR ARGS...: one run of a test binary's benchmarks in
# DIR (its package's directory in REV's worktree), raw output kept, samples recorded; a binary
# that did not build or a run that fails is noted, not fatal.
gobench() {
	local rev=$1 m=$2 round=$3 bin=$4 dir=$WORK/$1/$5 raw
	shift 5
	raw=$RESULTS/$m.$rev.round$round.txt
	if [ ! -x "$bin" ]; then
		echo "not built: $bin" >"$raw"
		return 0
	fi
	(cd "$dir" && timeout --foreground --kill-after=10 "$RUN_TIMEOUT" "$bin" -test.run '^$' "$@") >"$raw" 2>&1 ||
		log "$m, $rev, round $round: exit status $? (see $raw)"
	samples "$m" "$rev" "$round" <"$raw"
}

redis_addr() { echo "127.0.0.1:$REDIS_PORT"; }

start_redis() {
	free_port REDIS_PORT
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
		--daemonize yes --pidfile "$WORK/redis.pid" --logfile "$RESULTS/redis.log" >/dev/null
	for _ in $(seq 1 50); do [ -s "$WORK/redis.pid" ] && break; sleep 0.1; done
	REDIS_PID=$(cat "$WORK/redis.pid")
	wait_port "$REDIS_PORT" || { log "redis-server did not start on $(redis_addr)"; exit 1; }
	log "redis-server $(redis-server --version | awk '{print $3}') on $(redis_addr), pid $REDIS_PID"
}

flush_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null; }

# proc_cpu_ticks PID: utime + stime of a process, in clock ticks (fields 14 and 15 of
# /proc/PID/stat, counted after the parenthesised command name).
proc_cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12 + $13}'; }

# served HTTPPORT: the ShouldRateLimit calls the server has answered, from its /metrics.
served() {
	curl -s --max-time 5 "http://127.0.0.1:$1/metrics" |
		awk '/^sluice_request_duration_seconds_count\{transport="grpc"\} / {print $2; found = 1} END {if (!found) print ""}'
}

# serve REV STORE ROUND: one load run against that revision's `sluice serve`.
serve() {
	local rev=$1 store=$2 round=$3 bin=$WORK/bin/$1.sluice raw url grpc http t0 t1 n0 n1 hz
	raw=$RESULTS/serve_$store.$rev.round$round.txt
	if [ ! -x "$bin" ] || [ ! -x "$WORK/bin/load.test" ]; then
		echo "not built: $bin or the load generator" >"$raw"
		return 0
	fi
	url=memory
	if [ "$store" = redis ]; then
		url=redis://$(redis_addr)/0
		flush_redis
	fi
	grpc=$SERVE_GRPC_PORT
	http=$SERVE_HTTP_PORT
	"$bin" serve --config "$WORK/rules.yaml" --grpc-addr "127.0.0.1:$grpc" --http-addr "127.0.0.1:$http" \
		--log-level warn --store "$url" >"$raw.server.log" 2>&1 &
	SERVER_PID=$!
	if ! wait_port "$grpc" || ! wait_port "$http" || ! kill -0 "$SERVER_PID" 2>/dev/null; then
		echo "sluice serve did not start (see $raw.server.log)" >"$raw"
		log "serve $store, $rev, round $round: the server did not start"
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
		return 0
	fi
	hz=$(getconf CLK_TCK)
	n0=$(served "$http" || true)
	t0=$(proc_cpu_ticks "$SERVER_PID" || true)
	SLUICE_BENCH_GRPC=127.0.0.1:$grpc SLUICE_BENCH_HTTP=127.0.0.1:$http SLUICE_LOAD_SECONDS=$SERVE_SECONDS \
		timeout --foreground --kill-after=10 "$RUN_TIMEOUT" "$WORK/bin/load.test" -test.count=1 -test.run '^TestLoadExternal$' -test.v \
		>"$raw" 2>&1 || log "serve $store, $rev, round $round: load generator exit status $? (see $raw)"
	t1=$(proc_cpu_ticks "$SERVER_PID" || true)
	n1=$(served "$http" || true)
	kill "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=
	{
		echo "server pid cpu ticks $t0 -> $t1 (CLK_TCK $hz); served $n0 -> $n1"
		echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >>"$raw"
	awk -v m="serve" -v rev="$rev" -v round="$round" -v store="$store" \
		-v t0="$t0" -v t1="$t1" -v n0="$n0" -v n1="$n1" -v hz="$hz" 'BEGIN { OFS = "\t" }
		/ requests in .*\/s\)/ { for (i = 1; i <= NF; i++) if ($i ~ /^\([0-9.]+\/s\),?$/) { r = $i; gsub(/[(),]|\/s/, "", r); print m, rev, round, store, "req/s", r } }
		/server CPU: .* µs\/request/ { for (i = 1; i <= NF; i++) if ($i == "µs/request") print m, rev, round, store, "load-tool-µs/req", $(i - 1) }
		/FAIL|errors, first/ { failed = 1 }
		END {
			if (!failed && t0 != "" && t1 != "" && n0 != "" && n1 != "" && n1 > n0)
				print m, rev, round, store, "server-µs/req", (t1 - t0) / hz * 1e6 / (n1 - n0)
		}' "$raw" >>"$SAMPLES"
}

measure_round() { # ROUND
	local r=$1 rev
	if wants memory; then
		for rev in old new; do
			gobench "$rev" memory "$r" "$WORK/bin/$rev.bench.test" bench -test.bench '^BenchmarkMemory$/' \
				-test.benchmem -test.benchtime "$MEM_BENCHTIME"
		done
	fi
	if wants redis; then
		for rev in old new; do
			flush_redis
			SLUICE_REDIS_ADDR=$(redis_addr) gobench "$rev" redis "$r" "$WORK/bin/$rev.bench.test" bench \
				-test.bench '^BenchmarkRedisThroughput$/^goroutines=64$/' -test.benchmem -test.benchtime "$REDIS_BENCHTIME"
		done
	fi
	if wants middleware; then
		for rev in old new; do
			gobench "$rev" middleware "$r" "$WORK/bin/$rev.bench.test" bench \
				-test.bench '^BenchmarkHTTPMiddleware$/^(allowed|denied)$/^(bare|sluice|sluice_x_headers|sluice_no_headers|sethvargo)$' \
				-test.benchmem -test.benchtime "$MW_BENCHTIME"
			overhead "$rev" "$r"
			gobench "$rev" httplimit "$r" "$WORK/bin/$rev.httplimit.test" httplimit -test.bench . -test.benchmem -test.benchtime "$MW_BENCHTIME"
		done
	fi
	if wants serve; then
		for store in memory redis; do
			for rev in old new; do
				serve "$rev" "$store" "$r"
			done
		done
	fi
}

# --- summary ------------------------------------------------------------------------------
# table MEASUREMENT TITLE PRIMARY_UNIT "EXTRA UNITS": medians over rounds of each row's
# primary unit (old, new, new/old), the extra units as old / new medians, min-max per side.
table() {
	awk -F'\t' -v m="$1" -v title="$2" -v pu="$3" -v extra="$4" '
		function fmt(x, a) {
			if (x == "") return "—"
			a = x < 0 ? -x : x
			if (a >= 1000 || x == int(x)) return sprintf("%.0f", x)
			if (a >= 10) return sprintf("%.1f", x)
			return sprintf("%.2f", x)
		}
		function median(s, v, n, i, j, t) {
			if (s == "") return ""
			n = split(substr(s, 2), v, " "); cnt = n
			for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
			lo = v[1]; hi = v[n]
			return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		}
		$1 == m {
			if (!($4 in seen)) { seen[$4] = 1; order[++rows] = $4 }
			vals[$4, $5, $2] = vals[$4, $5, $2] " " $6
		}
		END {
			if (rows == 0) { print "### " title "\n\n(no samples)\n"; exit }
			ne = split(extra, ex, " ")
			print "### " title "\n"
			hdr = "| benchmark | old " pu " | new " pu " | new/old |"; sep = "|---|---:|---:|---:|"
			for (i = 1; i <= ne; i++) { hdr = hdr " " ex[i] " old / new |"; sep = sep "---:|" }
			print hdr " " pu " min–max (rounds), old; new |"; print sep "---|"
			for (r = 1; r <= rows; r++) {
				k = order[r]
				o = median(vals[k, pu, "old"]); orng = o == "" ? "—" : fmt(lo) "–" fmt(hi) " (" cnt ")"
				n = median(vals[k, pu, "new"]); nrng = n == "" ? "—" : fmt(lo) "–" fmt(hi) " (" cnt ")"
				ratio = (o != "" && n != "" && o + 0 != 0) ? sprintf("%.3f", n / o) : "—"
				line = "| " k " | " fmt(o) " | " fmt(n) " | " ratio " |"
				for (i = 1; i <= ne; i++) line = line " " fmt(median(vals[k, ex[i], "old"])) " / " fmt(median(vals[k, ex[i], "new"])) " |"
				print line " " orng "; " nrng " |"
			}
			print ""
		}' "$SAMPLES"
}

summary() {
	echo "## bench-compare: old $OLD, new $NEW"
	echo
	echo "$ROUNDS rounds, each measurement OLD then NEW; medians over rounds; $(date -u +%FT%TZ); $(nproc) cores;"
	echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg); load generator from $LOADREV; raw outputs in $RESULTS."
	echo
	wants memory && table memory "Memory store, Limiter.AllowN (bench BenchmarkMemory, benchtime $MEM_BENCHTIME)" ns/op "allocs/op"
	wants redis && table redis "Redis, 64 goroutines (bench BenchmarkRedisThroughput, benchtime $REDIS_BENCHTIME)" decisions/s "p50-µs p99-µs allocs/op"
	if wants middleware; then
		table middleware "HTTP middleware, per request (bench BenchmarkHTTPMiddleware, benchtime $MW_BENCHTIME)" cpu-ns/op "ns/op B/op allocs/op"
		table mw_overhead "HTTP middleware, overhead over bare (the row minus bare, same run)" cpu-ns/op "ns/op"
		table httplimit "httplimit package benchmarks (benchtime $MW_BENCHTIME)" cpu-ns/op "ns/op allocs/op"
	fi
	wants serve && table serve "sluice serve, server CPU per request (/proc/PID/stat over requests served; ${SERVE_SECONDS} s load + 1 s warm-up)" server-µs/req "req/s load-tool-µs/req"
	return 0
}

# --- main ---------------------------------------------------------------------------------
START=$(date +%s)
log "old $OLD, new $NEW, $ROUNDS rounds; results in $RESULTS"
mkdir -p "$WORK/bin"
printf 'domain: load\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 50}\n' >"$WORK/rules.yaml"
checkout "$OLD" old
checkout "$NEW" new
for rev in old new; do
	log "building $rev"
	build "$rev"
done
if wants serve; then
	log "building the load generator from $LOADREV"
	build_load
	free_port SERVE_GRPC_PORT
	free_port SERVE_HTTP_PORT
fi
if wants redis || wants serve; then start_redis; fi
log "built in $(($(date +%s) - START)) s"

for r in $(seq 1 "$ROUNDS"); do
	log "round $r of $ROUNDS ($(($(date +%s) - START)) s; load average $(cut -d' ' -f1-3 /proc/loadavg))"
	measure_round "$r"
done
summary | tee "$RESULTS/summary.md"
log "done in $(($(date +%s) - START)) s; raw outputs in $RESULTS"

#!/usr/bin/env bash
# Head to head (issue 26): envoyproxy/ratelimit, Sluice on Redis, Sluice on the memory store
# and the gRPC floor, in one run, on one redis-server this script starts and stops by its PID.
#
# Contenders (CONTENDERS, default "peer sluice sluice-memory floor", plus sluice-before with
# BEFORE), each a fresh process per run, started with `env -i` (Sluice also reads the peer's
# variables: nothing leaks from the caller's environment):
#   peer           envoyproxy/ratelimit's service_cmd: REDIS_SOCKET_TYPE=tcp, REDIS_URL, USE_STATSD=false,
#                  the rules below in RUNTIME_ROOT/ratelimit/config/bench.yaml; in the hot-key
#                  scenario with LOCAL_CACHE_SIZE_IN_BYTES=PEER_LOCAL_CACHE (default 64 MiB).
#                  Its stats (PEER_STATS): prometheus (default: USE_PROMETHEUS=true on its own
#                  port, what Sluice does: counted per request, served on /metrics), null
#                  (DISABLE_STATS=true: counted, never emitted) or log (USE_STATSD=false alone:
#                  its fallback sink writes every timer sample to stdout at each 10 s flush,
#                  about one log line per request, which the peer's CPU then includes).
#   sluice         `sluice serve --store redis://...` built from this tree (sync mode; the
#                  hot-key scenario with --mode overlimit), the same rules file, so its default
#                  algorithm (the sliding window) applies.
#   sluice-before  the same, built from commit BEFORE (git archive of it, not a checkout).
#   sluice-counters  `sluice` with the store URL's counters=true: the windows kept as plain
#                  counters and decided without Lua (redis.WithCounters; issue 34, item 3).
#   sluice-peermode  `sluice` in envoyproxy/ratelimit's mode, what a drop-in gets:
#                  --default-algorithm fixed_window --count-denied (and --mode overlimit in the
#                  hot-key scenario: the peer's LOCAL_CACHE_SIZE_IN_BYTES); sluice-before-peermode
#                  the same built from BEFORE (issue 34, item 1).
#   sluice-memory  `sluice serve --store memory` from this tree.
#   floor          bench/cmd/rlsfloor: grpc-go answering OK to every ShouldRateLimit, no work.
#   floor-redis    the same waiting for one Redis round trip (a PING) per request: the floor of a
#                  server deciding on Redis, whose callers wait that long (issue 34, item 4).
# Scenarios (SCENARIOS, default "users hot single"), all on domain "bench":
#   users   64 closed-loop callers (one gRPC connection each), 10,000 users (key "user",
#           100/s each: every user is asked about ~1/s, so nearly everything is allowed);
#   hot     64 callers, one key hot=hot at 100/s: nearly everything over the limit;
#   single  one caller, 10,000 users.
# Rounds: ROUNDS (default 3); in each round every scenario runs every contender once, the
# contenders' order rotating from round to round. Each run: a new server process, FLUSHALL
# (contenders on Redis), the first successful answer, a 1 s warm-up, then SECONDS (default 10)
# measured (bash's own SECONDS, read on the script's first line, so SECONDS=5 works).
# Per run (bench/cmd/rlsload, the load generator; per request of the measured window):
#   requests/s, p50/p99 latency, errors, share over the limit;
#   server CPU: utime+stime of the server process (/proc/PID/stat) — the same measure for
#     every contender, whatever its metrics;
#   Redis CPU: INFO cpu used_cpu_user+used_cpu_sys;
#   Redis commandstats: usec and calls of script commands (EVAL/EVALSHA/FCALL) and of the
#     others; decisions per script call = requests / script calls (Sluice's batch size). Redis
#     counts the commands a script calls too, so Sluice's "other" is inside its scripts.
# Output, in RESULTS (default a new /tmp/sluice-h2h.XXXXXX): runs.jsonl (one line per run),
# log.txt, server.log (the servers' output), table.md (markdown: every run; min/median per
# contender and scenario with the server CPU above the floor's; the medians side by side, one
# column per contender), also printed at the end. `rlsload table runs.jsonl ...` prints it
# again, from one run's file or several. A call that fails counts as an error, never stops
# the run; a server that does not answer within 30 s of its start does.
#
#   PEER_SRC=/tmp/ratelimit bench/headtohead.sh       # a checkout of envoyproxy/ratelimit, built here
#   PEER_BIN=/path/to/ratelimit bench/headtohead.sh   # or its service_cmd, built already
#   BEFORE=2484288 ROUNDS=5 SECONDS=10 PEER_BIN=... bench/headtohead.sh
#   CONTENDERS="sluice floor" SCENARIOS=users bench/headtohead.sh   # no peer needed
#
# Getting the peer: git clone https://github.com/envoyproxy/ratelimit /tmp/ratelimit (its
# `go build ./src/service_cmd` needs the Go module proxy). Prerequisites: go, redis-server,
# git (for BEFORE); the script stops before building anything when one is missing. Ports:
# REDIS_PORT (default 27501) and BASE_PORT..BASE_PORT+9 (default 27510), all on 127.0.0.1;
# the script refuses ports already in use. It kills only the processes it started, by PID.
# Nothing here runs in CI (no peer there). The machine's other work shows in every figure:
# compare contenders within one run, and read the load average recorded with each run.
# SECONDS is bash's seconds-since-start, seeded from the environment: read it before any time passes.
SECS=$SECONDS
set -euo pipefail
[ "$SECS" -gt 0 ] || SECS=10
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
SCENARIOS=${SCENARIOS:-users hot single}
CONTENDERS=${CONTENDERS:-peer sluice${BEFORE:+ sluice-before} sluice-memory floor}
REDIS_PORT=${REDIS_PORT:-27501}
BASE_PORT=${BASE_PORT:-27510}
PEER_LOCAL_CACHE=${PEER_LOCAL_CACHE:-67108864}
PEER_STATS=${PEER_STATS:-prometheus}
RESULTS=${RESULTS:-$(mktemp -d /tmp/sluice-h2h.XXXXXX)}
REDIS=127.0.0.1:$REDIS_PORT

die() { echo "headtohead: $*" >&2; exit 2; }

# Prerequisites first, before anything is built or started.
command -v go >/dev/null || die "go not found in PATH"
command -v redis-server >/dev/null || die "redis-server not found in PATH (apt-get install redis-server)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS: want a positive whole number, got '$ROUNDS'"
for c in $CONTENDERS; do
	case $c in
	peer)
		if [ -n "${PEER_BIN:-}" ]; then
			[ -x "$PEER_BIN" ] || die "PEER_BIN=$PEER_BIN is not an executable file"
		elif [ -n "${PEER_SRC:-}" ]; then
			[ -d "$PEER_SRC/src/service_cmd" ] || die "PEER_SRC=$PEER_SRC has no src/service_cmd: not a checkout of envoyproxy/ratelimit"
		else
			die "contender peer needs envoyproxy/ratelimit: set PEER_BIN to its built service_cmd, or PEER_SRC to a checkout (git clone https://github.com/envoyproxy/ratelimit), or leave peer out of CONTENDERS"
		fi
		;;
	sluice-before | sluice-before-peermode)
		[ -n "${BEFORE:-}" ] || die "contender $c needs BEFORE=<commit>"
		command -v git >/dev/null || die "BEFORE needs git in PATH"
		git -C "$ROOT" rev-parse --verify -q "${BEFORE}^{commit}" >/dev/null || die "BEFORE=$BEFORE is not a commit of $ROOT"
		;;
	sluice | sluice-counters | sluice-peermode | sluice-memory | floor | floor-redis) ;;
	*) die "CONTENDERS: unknown contender '$c' (want peer, sluice, sluice-before, sluice-counters, sluice-peermode, sluice-before-peermode, sluice-memory, floor, floor-redis)" ;;
	esac
done
case $PEER_STATS in prometheus | null | log) ;; *) die "PEER_STATS: want prometheus, null or log, got '$PEER_STATS'" ;; esac
for s in $SCENARIOS; do
	case $s in users | hot | single) ;; *) die "SCENARIOS: unknown scenario '$s' (want users, hot, single)" ;; esac
done
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$REDIS_PORT" $(seq "$BASE_PORT" $((BASE_PORT + 9))); do
	if port_busy "$p"; then die "port 127.0.0.1:$p is in use (set REDIS_PORT / BASE_PORT)"; fi
done

mkdir -p "$RESULTS"
BIN=$(mktemp -d /tmp/sluice-h2h-bin.XXXXXX)
REDIS_PID=
SERVER_PID=
cleanup() {
	if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
	if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true; fi
	rm -rf "$BIN"
}
trap cleanup EXIT INT TERM
log() { echo "$*" | tee -a "$RESULTS/log.txt"; }

# Builds.
log "building into $BIN (results in $RESULTS)"
(cd "$ROOT" && go build -o "$BIN/sluice" ./cmd/sluice)
(cd "$ROOT/bench" && go build -o "$BIN/rlsload" ./cmd/rlsload && go build -o "$BIN/rlsfloor" ./cmd/rlsfloor)
if [[ " $CONTENDERS " == *" sluice-before"* ]]; then
	mkdir "$BIN/before"
	git -C "$ROOT" archive "$BEFORE" | tar -x -C "$BIN/before"
	(cd "$BIN/before" && go build -o "$BIN/sluice-before" ./cmd/sluice)
	log "sluice-before: $(git -C "$ROOT" rev-parse --short "$BEFORE")"
fi
if [[ " $CONTENDERS " == *" peer "* ]]; then
	if [ -z "${PEER_BIN:-}" ]; then
		(cd "$PEER_SRC" && go build -o "$BIN/ratelimit" ./src/service_cmd)
		PEER_BIN=$BIN/ratelimit
		log "peer: built from $PEER_SRC ($(git -C "$PEER_SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
	fi
	log "peer: $PEER_BIN, stats: $PEER_STATS"
fi
log "sluice: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' + uncommitted changes')"

# One rules file for every contender (envoyproxy/ratelimit's format, which Sluice reads).
mkdir -p "$BIN/runtime/ratelimit/config"
RULES=$BIN/runtime/ratelimit/config/bench.yaml
cat >"$RULES" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: hot
    rate_limit: {unit: second, requests_per_unit: 100}
YAML

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$RESULTS/redis.log" &
REDIS_PID=$!
for _ in $(seq 1 100); do port_busy "$REDIS_PORT" && break; sleep 0.1; done
port_busy "$REDIS_PORT" || die "redis-server did not start on $REDIS (see $RESULTS/redis.log)"
log "redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $REDIS, pid $REDIS_PID"

# start CONTENDER SCENARIO: starts the contender's server in the background, sets SERVER_PID
# and ADDR. Every server gets a clean environment and its own ports.
start() {
	local c=$1 s=$2 grpc=$BASE_PORT http=$((BASE_PORT + 1)) debug=$((BASE_PORT + 2))
	local base=(env -i "PATH=$PATH" "HOME=${HOME:-/tmp}")
	ADDR=127.0.0.1:$grpc
	case $c in
	peer)
		local extra=()
		if [ "$s" = hot ]; then extra+=("LOCAL_CACHE_SIZE_IN_BYTES=$PEER_LOCAL_CACHE"); fi
		case $PEER_STATS in
		prometheus) extra+=(USE_PROMETHEUS=true "PROMETHEUS_ADDR=127.0.0.1:$((BASE_PORT + 3))") ;;
		null) extra+=(DISABLE_STATS=true) ;;
		esac
		"${base[@]}" USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp "REDIS_URL=$REDIS" \
			"RUNTIME_ROOT=$BIN/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
			HOST=127.0.0.1 "PORT=$http" GRPC_HOST=127.0.0.1 "GRPC_PORT=$grpc" DEBUG_HOST=127.0.0.1 "DEBUG_PORT=$debug" \
			"${extra[@]}" "$PEER_BIN" >>"$RESULTS/server.log" 2>&1 &
		;;
	sluice*)
		local bin=$BIN/sluice store=redis://$REDIS/0 mode=sync extra=()
		case $c in sluice-before*) bin=$BIN/sluice-before ;; esac
		case $c in *peermode) extra+=(--default-algorithm fixed_window --count-denied) ;; esac
		if [ "$c" = sluice-counters ]; then store="$store?counters=true"; fi
		if [ "$c" = sluice-memory ]; then store=memory; elif [ "$s" = hot ]; then mode=overlimit; fi
		"${base[@]}" "$bin" serve --config "$RULES" --grpc-addr "$ADDR" --http-addr "127.0.0.1:$http" \
			--log-level warn --store "$store" --mode "$mode" "${extra[@]}" >>"$RESULTS/server.log" 2>&1 &
		;;
	floor)
		"${base[@]}" "$BIN/rlsfloor" -addr "$ADDR" >>"$RESULTS/server.log" 2>&1 &
		;;
	floor-redis)
		"${base[@]}" "$BIN/rlsfloor" -addr "$ADDR" -redis "$REDIS" >>"$RESULTS/server.log" 2>&1 &
		;;
	esac
	SERVER_PID=$!
}

stop() {
	kill "$SERVER_PID" 2>/dev/null || true
	wait "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=
}

read -r -a order <<<"$CONTENDERS"
log "rounds $ROUNDS, ${SECS}s per run after a 1 s warm-up; scenarios: $SCENARIOS; contenders: $CONTENDERS"
log "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
	for s in $SCENARIOS; do
		case $s in
		users) args=(-callers 64 -users 10000 -scenario "64 callers, 10k users") ;;
		hot) args=(-callers 64 -users 0 -scenario "64 callers, hot over-limit key") ;;
		single) args=(-callers 1 -users 10000 -scenario "1 caller, 10k users") ;;
		esac
		# Rotate the contenders' order from round to round.
		n=${#order[@]}
		for i in $(seq 0 $((n - 1))); do
			c=${order[$(((i + round - 1) % n))]}
			redis_args=()
			case $c in sluice-memory | floor) ;; *) redis_args=(-redis "$REDIS" -flush) ;; esac
			echo "== $(date -u +%T) round $round, $s, $c" >>"$RESULTS/server.log"
			start "$c" "$s"
			if ! "$BIN/rlsload" run -addr "$ADDR" -pid "$SERVER_PID" "${redis_args[@]}" -contender "$c" -round "$round" \
				-duration "${SECS}s" -warmup 1s "${args[@]}" -out "$RESULTS/runs.jsonl" | tee -a "$RESULTS/log.txt"; then
				stop
				die "run failed: round $round, $s, $c (server output: $RESULTS/server.log)"
			fi
			stop
		done
	done
done
log "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/rlsload" table "$RESULTS/runs.jsonl" | tee "$RESULTS/table.md"
echo "results: $RESULTS"

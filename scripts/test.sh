#!/usr/bin/env bash
# Runs Sluice's whole test suite against real servers on 127.0.0.1.
#
# It installs redis-server and memcached when they are missing (apt-get), starts every server
# the tests need on private ports, exports their addresses as SLUICE_* variables, runs gofmt,
# go vet, staticcheck, go test -race and the short fuzz runs, and stops what it started by PID.
# It exits non-zero on any failure.
#
# Usage: scripts/test.sh            (from the repository root)
#        SLUICE_TEST_QUICK=1 scripts/test.sh   skips staticcheck and fuzzing
#        SLUICE_CHAOS=1 scripts/test.sh        the long forms only (scripts/chaos.sh)
#        scripts/test.sh CMD [ARG...]          starts the servers, runs CMD with their SLUICE_*
#                                              variables instead of the suite, and stops them
#                                              (e.g. scripts/test.sh go test -race ./store/redis)
#        SLUICE_REDIS_SERVER=valkey-server scripts/test.sh CMD...   the same on Valkey: every
#                                              server (standalone, Sentinel, Cluster, TLS, and the
#                                              tests' own) is valkey-server, installed from Debian
#                                              bookworm-backports when missing (issue 34, item 5)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '==> [%ds] %s\n' "$SECONDS" "$*" >&2; } # seconds since the script started

# --- servers --------------------------------------------------------------------------------
# REDIS_SERVER is redis-server, or another server of its protocol and arguments (valkey-server).
REDIS_SERVER=${SLUICE_REDIS_SERVER:-redis-server}
case $REDIS_SERVER in redis-server | valkey-server) ;; *) log "SLUICE_REDIS_SERVER: want redis-server or valkey-server, got '$REDIS_SERVER'"; exit 2 ;; esac
need_install=()
command -v redis-server >/dev/null 2>&1 || need_install+=(redis-server) # its redis-cli too
command -v memcached >/dev/null 2>&1 || need_install+=(memcached)
command -v openssl >/dev/null 2>&1 || need_install+=(openssl) # test.d/tls.sh's certificates
command -v chromium >/dev/null 2>&1 || need_install+=(chromium) # the /ui test's headless browser
command -v buildah >/dev/null 2>&1 || need_install+=(buildah)   # the image test (TestImage)
command -v nginx >/dev/null 2>&1 || need_install+=(nginx)       # the gateways' tests (issue 35)
command -v caddy >/dev/null 2>&1 || need_install+=(caddy)
if [ ${#need_install[@]} -gt 0 ]; then
	log "installing ${need_install[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_install[@]}" >/dev/null
fi
if ! command -v "$REDIS_SERVER" >/dev/null 2>&1 && [ "$REDIS_SERVER" = valkey-server ]; then
	# Debian 12 ships Valkey in bookworm-backports only (valkey-server 8.0).
	log "installing valkey-server from bookworm-backports"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
		$SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports valkey-server >/dev/null
fi

WORK=$(mktemp -d /tmp/sluice-test.XXXXXX)
PIDS=()
cleanup() {
	local rc=$?
	for pid in "${PIDS[@]}"; do
		kill -CONT "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT INT TERM

# Ports: a base chosen per run so two runs on one machine do not collide, in 20000-22450 so
# that every port and every Cluster bus port (port + 10000) lies below the kernel's ephemeral
# ports (32768 and up), which an outgoing connection could hold. Tests' own servers use
# 10000-19999 (internal/testenv.freePort).
BASE=${SLUICE_TEST_PORT_BASE:-$((20000 + ($$ % 50) * 50))}

wait_port() { # host port what
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	log "$3 did not start on $1:$2"
	return 1
}

start_redis() { # port [extra args...]
	local port=$1
	shift
	mkdir -p "$WORK/redis-$port"
	"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$WORK/redis-$port" --daemonize no --logfile "$WORK/redis-$port.log" "$@" &
	PIDS+=($!)
	wait_port 127.0.0.1 "$port" "$REDIS_SERVER"
}

REDIS_PORT=$BASE
start_redis "$REDIS_PORT"
export SLUICE_REDIS_ADDR=127.0.0.1:$REDIS_PORT
# The PID lets failure tests stop and kill exactly the server they were given.
export SLUICE_REDIS_PID=${PIDS[-1]}
export SLUICE_REDIS_SERVER_BIN=$(command -v "$REDIS_SERVER")

MEMCACHED_PORT=$((BASE + 1))
MEMCACHED_USER=()
[ "$(id -u)" -ne 0 ] || MEMCACHED_USER=(-u nobody) # memcached refuses to run as root
memcached -l 127.0.0.1 -p "$MEMCACHED_PORT" -U 0 -m 64 "${MEMCACHED_USER[@]}" &
PIDS+=($!)
wait_port 127.0.0.1 "$MEMCACHED_PORT" memcached
export SLUICE_MEMCACHED_ADDR=127.0.0.1:$MEMCACHED_PORT
export SLUICE_CHROMIUM=$(command -v chromium)
export SLUICE_BUILDAH=$(command -v buildah) # builds the Containerfile's image, runs it --isolation chroot
# The gateways in front of sluice serve's doors; each test starts its own on a loopback port.
export SLUICE_NGINX=$(command -v nginx) SLUICE_CADDY=$(command -v caddy)

# Sentinel and Cluster topologies; TLS servers.
for f in scripts/test.d/*.sh; do
	[ -e "$f" ] || continue
	# shellcheck source=/dev/null
	. "$f"
done

# fuzz_all runs every fuzz target of the module for $1 (an execution count such as 50000x,
# or a duration).
fuzz_all() {
	while read -r pkg target; do
		[ -n "$pkg" ] || continue
		budget=$1
		case "$target:$1" in
		# Each input starts a proxy and sends it 12 requests (~50 inputs a second on 2 cores):
		# the short run's execution count would take half an hour. A duration applies as given.
		FuzzRuleForms:*x) budget=2000x ;;
		# Each input is a whole forward-auth request through sluice serve's handler (~2,000 a
		# second on a loaded 2-core machine): 20000x keeps it to about 10 s.
		FuzzForwardAuth:*x) budget=20000x ;;
		esac
		log "fuzz $pkg $target ($budget)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -fuzzminimizetime 100x -timeout 60m "$pkg"
	done < <(grep -rhoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' . |
		sed 's/^func //' | sort -u | while read -r t; do
		f=$(grep -rlE "^func $t\(" --include='*_test.go' . | head -1)
		echo "./$(dirname "${f#./}") $t"
	done)
}

# --- one command with the servers up, instead of the suite -----------------------------------
if [ $# -gt 0 ]; then
	log "running $* (servers up)"
	"$@"
	exit $?
fi

# --- chaos: the long forms of the reliability tests (issue 16), then minutes of fuzzing ------
if [ -n "${SLUICE_CHAOS:-}" ]; then
	export SLUICE_CHAOS
	log "chaos: reliability tests, long forms (SLUICE_CHAOS=1), one package at a time"
	go test -count=1 -p 1 -timeout 60m -v \
		-run 'TestLLMBudgetChaos|TestKeyFlood|TestHugeRequestsFlatMemory|TestSlowloris|TestMaxConns|TestMaxHits|TestClockSkew|TestLinearizable|TestSoak|TestSentinelFailoverUnderLoad|TestReshardHotSlot|TestClusterPrimaryKill|TestServeSentinelFailover|TestServeClusterPrimaryKill|TestTimedOutScriptsNotRetried|TestScriptCacheLost|TestFallback' \
		./store/memory/ ./store/redis/ ./server/ ./distributed/ ./cmd/sluice/
	log "chaos: fuzzing"
	fuzz_all "${SLUICE_FUZZTIME:-2m}"
	log "chaos: all passed"
	exit 0
fi

# --- checks ---------------------------------------------------------------------------------
log "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

# The modules: the root, the comparison harness, and the figures (their own go.mod, so that
# gonum stays out of the root go.mod; go.work joins them to the root in a clone).
MODULES=(. bench simulate/figures)
for m in "${MODULES[@]}"; do
	[ -f "$m/go.mod" ] || continue
	log "go vet ($m)"
	(cd "$m" && go vet ./...)
done

if [ -z "${SLUICE_TEST_QUICK:-}" ]; then
	for m in "${MODULES[@]}"; do
		[ -f "$m/go.mod" ] || continue
		log "staticcheck ($m)"
		(cd "$m" && go run honnef.co/go/tools/cmd/staticcheck@latest ./...)
	done
fi

log "go test -race (real-time tests deferred to the timing phase)"
SLUICE_TIMING=defer go test -race -count=1 -timeout 30m ./...
log "go vet and go test -race -tags plot (simulate --out and replay --out, the plotting build, through go.work)"
go vet -tags plot ./cmd/sluice
go test -race -count=1 -tags plot -run '^(TestSimulate|TestReplayOut)' ./cmd/sluice
log "go test -race (simulate/figures module)"
(cd simulate/figures && go test -race -count=1 ./...)

# Tests that assert real elapsed time (testenv.Timing) run again here, one package at a time,
# so no other package's tests compete with them for the CPUs.
# Only those tests run again (the rest of their package ran above): each package's line is
# "DIR PATTERN", the pattern naming the Test functions that call testenv.Timing, or "." (the
# whole package) where a helper calls it, its callers not known here.
timing_runs=$(grep -rl --include='*_test.go' 'testenv.Timing(t)' . | xargs -r perl -ne '
	$f = $1 if /^func (?:\([^)]*\) )?(\w+)/;
	if (/testenv\.Timing\(t\)/) { (my $d = $ARGV) =~ s{/[^/]*$}{}; $t{$d}{$f} = 1 }
	END { for my $d (sort keys %t) { my @n = sort keys %{$t{$d}};
		print "$d ", ((grep { !/^Test/ } @n) ? "." : "^(" . join("|", @n) . ")\$"), "\n" } }')
while read -r pkg pattern; do
	[ -n "$pkg" ] || continue
	log "go test -race (timing phase) $pkg -run '$pattern'"
	go test -race -count=1 -p 1 -timeout 10m -run "$pattern" "$pkg"
done <<<"$timing_runs"
if [ -f bench/go.mod ]; then
	log "go test (bench module: correctness of the comparison harness, no benchmarks)"
	(cd bench && go test -count=1 -timeout 10m ./...)
fi

if [ -z "${SLUICE_TEST_QUICK:-}" ]; then
	log "fuzzing (short runs)"
	# An execution count, not a duration: with a duration, go test -fuzz sometimes ends with a
	# spurious "context deadline exceeded" when its deadline passes mid-execution.
	fuzz_all "${SLUICE_FUZZTIME:-50000x}"
fi

log "all checks passed"

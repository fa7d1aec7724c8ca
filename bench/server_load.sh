#!/usr/bin/env bash
# Service benchmark (docs/BENCHMARKS.md, "Service"): builds `sluice serve`, starts it on
# 127.0.0.1 with one rule (50 requests/s per client address), drives it with 64 concurrent
# gRPC callers and prints requests/s, latency percentiles and the server's own CPU time per
# request (process CPU delta / requests). Stops only the server it started, by PID.
#
#   bench/server_load.sh [STORE_URL] [SECONDS]      STORE_URL: memory (default), redis://...
#   CLIENT=ghz bench/server_load.sh ...              ghz (one connection, 64 streams) instead of
#                                                    the Go load generator (64 connections)
#   DOMAIN=grpc.health.v1 bench/server_load.sh       the gRPC floor: health Check, same server
#   PPROF=127.0.0.1:26060 bench/server_load.sh ...   also serve /debug/pprof/ during the run
set -euo pipefail
STORE=${1:-memory}
SECS=${2:-10}
CLIENT=${CLIENT:-go}
DOMAIN=${DOMAIN:-load}
GRPC=127.0.0.1:${SLUICE_BENCH_GRPC_PORT:-28081}
HTTP=127.0.0.1:${SLUICE_BENCH_HTTP_PORT:-28080}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/sluice-serverbench.XXXXXX)
PID=
cleanup() {
	if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

cd "$ROOT"
go build -o "$WORK/sluice" ./cmd/sluice
go test -c -o "$WORK/server.test" ./server/
printf 'domain: load\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 50}\n' >"$WORK/rules.yaml"
args=(serve --config "$WORK/rules.yaml" --grpc-addr "$GRPC" --http-addr "$HTTP" --log-level warn --store "$STORE")
if [ -n "${PPROF:-}" ]; then args+=(--pprof "$PPROF"); fi
"$WORK/sluice" "${args[@]}" &
PID=$!
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/${GRPC%:*}/${GRPC#*:}") 2>/dev/null; then break; fi
	sleep 0.1
done
echo "store $STORE, client $CLIENT, domain $DOMAIN, ${SECS}s; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
case $CLIENT in
go)
	SLUICE_BENCH_GRPC=$GRPC SLUICE_BENCH_HTTP=$HTTP SLUICE_BENCH_DOMAIN=$DOMAIN SLUICE_LOAD_SECONDS=$SECS \
		"$WORK/server.test" -test.count=1 -test.run '^TestLoadExternal$' -test.v | grep -E 'requests|CPU|FAIL|errors'
	;;
ghz)
	GHZ=${GHZ:-$(go env GOPATH)/bin/ghz} # go install github.com/bojand/ghz/cmd/ghz@latest
	cpu() { curl -s "http://$HTTP/metrics" | awk '/^process_cpu_seconds_total /{print $2}'; }
	data='{"domain":"load","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.{{.RequestNumber}}"}]}]}'
	call=(--insecure --call envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit -d "$data" -c 64 --connections 1)
	"$GHZ" "${call[@]}" -z 1s "$GRPC" >/dev/null # warm-up
	c0=$(cpu)
	"$GHZ" "${call[@]}" -z "${SECS}s" "$GRPC" >"$WORK/ghz.txt"
	c1=$(cpu)
	n=$(awk '/Count:/{print $2}' "$WORK/ghz.txt")
	grep -E 'Count:|Requests/sec|50 % in|90 % in|99 % in|\[' "$WORK/ghz.txt"
	echo "server CPU: $(echo "$c1 - $c0" | bc) s for $n requests = $(echo "scale=1; ($c1 - $c0) * 1000000 / $n" | bc) µs/request"
	;;
*)
	echo "CLIENT: want go or ghz, got $CLIENT" >&2
	exit 2
	;;
esac
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

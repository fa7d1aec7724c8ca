# Sourced by scripts/test.sh: starts a Redis Sentinel setup (primary, replica and three
# Sentinels, quorum 2) and a 3-primary Redis Cluster on 127.0.0.1, ports $BASE+10 upward, and
# exports SLUICE_REDIS_SENTINEL_ADDRS, SLUICE_REDIS_SENTINEL_MASTER and
# SLUICE_REDIS_CLUSTER_ADDRS for store/redis. Every process goes into PIDS, so cleanup stops
# it by PID.

# --- Sentinel -------------------------------------------------------------------------------
SENTINEL_MASTER=sluice
SENTINEL_PRIMARY_PORT=$((BASE + 10))
SENTINEL_REPLICA_PORT=$((BASE + 11))
log "redis sentinel: primary :$SENTINEL_PRIMARY_PORT, replica :$SENTINEL_REPLICA_PORT"
start_redis "$SENTINEL_PRIMARY_PORT"
start_redis "$SENTINEL_REPLICA_PORT" --replicaof 127.0.0.1 "$SENTINEL_PRIMARY_PORT"

sentinel_addrs=()
for port in $((BASE + 12)) $((BASE + 13)) $((BASE + 14)); do
	conf="$WORK/sentinel-$port.conf" # Sentinel rewrites its config file: one each, writable
	cat >"$conf" <<CONF
port $port
bind 127.0.0.1
daemonize no
logfile "$WORK/sentinel-$port.log"
dir "$WORK"
sentinel monitor $SENTINEL_MASTER 127.0.0.1 $SENTINEL_PRIMARY_PORT 2
sentinel down-after-milliseconds $SENTINEL_MASTER 1000
sentinel failover-timeout $SENTINEL_MASTER 4000
sentinel parallel-syncs $SENTINEL_MASTER 1
CONF
	"$REDIS_SERVER" "$conf" --sentinel &
	PIDS+=($!)
	wait_port 127.0.0.1 "$port" "redis-sentinel"
	sentinel_addrs+=("127.0.0.1:$port")
done

# Ready when the replica is in sync and every Sentinel knows the replica and the others, so
# that SENTINEL FAILOVER in the tests can succeed at once.
sentinel_ready() {
	redis-cli -p "$SENTINEL_REPLICA_PORT" info replication | grep -q 'master_link_status:up' || return 1
	local s
	for s in "${sentinel_addrs[@]}"; do
		local p=${s##*:}
		[ "$(redis-cli -p "$p" sentinel replicas "$SENTINEL_MASTER" 2>/dev/null | grep -c "^127.0.0.1:$SENTINEL_REPLICA_PORT$")" -ge 1 ] || return 1
		[ "$(redis-cli -p "$p" sentinel sentinels "$SENTINEL_MASTER" 2>/dev/null | grep -c '^name$')" -ge 2 ] || return 1
	done
}
for _ in $(seq 1 150); do
	sentinel_ready && break
	sleep 0.2
done
sentinel_ready || { log "redis sentinel did not become ready"; exit 1; }
export SLUICE_REDIS_SENTINEL_ADDRS=$(IFS=,; echo "${sentinel_addrs[*]}")
export SLUICE_REDIS_SENTINEL_MASTER=$SENTINEL_MASTER

# --- Cluster --------------------------------------------------------------------------------
cluster_addrs=()
for port in $((BASE + 20)) $((BASE + 21)) $((BASE + 22)); do
	start_redis "$port" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000
	cluster_addrs+=("127.0.0.1:$port")
done
log "redis cluster: ${cluster_addrs[*]}"
redis-cli --cluster create "${cluster_addrs[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/cluster-create.log" 2>&1 ||
	{ cat "$WORK/cluster-create.log" >&2; exit 1; }
cluster_ok() {
	local a
	for a in "${cluster_addrs[@]}"; do
		redis-cli -p "${a##*:}" cluster info | grep -q 'cluster_state:ok' || return 1
	done
}
for _ in $(seq 1 150); do
	cluster_ok && break
	sleep 0.2
done
cluster_ok || { log "redis cluster did not reach cluster_state:ok"; exit 1; }
export SLUICE_REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${cluster_addrs[*]}")

# Sourced by scripts/test.sh: generates a test certificate authority, a server certificate
# (127.0.0.1, localhost) and a client certificate with openssl into $WORK/tls (never
# committed), then starts a TLS-only Redis and a TLS-only memcached on 127.0.0.1, ports
# $BASE+30 and $BASE+31, both requiring a client certificate of that authority. Exports
# SLUICE_REDIS_TLS_ADDR, SLUICE_MEMCACHED_TLS_ADDR, SLUICE_TLS_CA, SLUICE_TLS_CLIENT_CERT and
# SLUICE_TLS_CLIENT_KEY. Every process goes into PIDS, so cleanup stops it by PID.

TLS_DIR="$WORK/tls"
mkdir -p "$TLS_DIR"
chmod 755 "$TLS_DIR" # memcached runs as nobody when the suite runs as root
log "tls: test certificates in $TLS_DIR"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj "/CN=sluice test CA" -keyout "$TLS_DIR/ca-key.pem" -out "$TLS_DIR/ca.pem" 2>/dev/null
tls_cert() { # name subject extensions
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" \
		-keyout "$TLS_DIR/$1-key.pem" -out "$TLS_DIR/$1.csr" 2>/dev/null
	printf '%s\n' "$3" >"$TLS_DIR/$1.ext"
	openssl x509 -req -in "$TLS_DIR/$1.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca-key.pem" \
		-CAcreateserial -days 2 -extfile "$TLS_DIR/$1.ext" -out "$TLS_DIR/$1.pem" 2>/dev/null
	chmod 644 "$TLS_DIR/$1-key.pem"
}
tls_cert server localhost "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
tls_cert client "sluice test client" "extendedKeyUsage=clientAuth"

REDIS_TLS_PORT=$((BASE + 30))
log "tls: redis :$REDIS_TLS_PORT"
mkdir -p "$WORK/redis-tls"
"$REDIS_SERVER" --port 0 --tls-port "$REDIS_TLS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$WORK/redis-tls" --daemonize no --logfile "$WORK/redis-tls.log" \
	--tls-cert-file "$TLS_DIR/server.pem" --tls-key-file "$TLS_DIR/server-key.pem" \
	--tls-ca-cert-file "$TLS_DIR/ca.pem" --tls-auth-clients yes &
PIDS+=($!)
wait_port 127.0.0.1 "$REDIS_TLS_PORT" "redis-server (TLS)"

MEMCACHED_TLS_PORT=$((BASE + 31))
log "tls: memcached :$MEMCACHED_TLS_PORT"
memcached -l 127.0.0.1 -p "$MEMCACHED_TLS_PORT" -U 0 -m 64 "${MEMCACHED_USER[@]}" -Z \
	-o "ssl_chain_cert=$TLS_DIR/server.pem,ssl_key=$TLS_DIR/server-key.pem,ssl_ca_cert=$TLS_DIR/ca.pem,ssl_verify_mode=3" &
PIDS+=($!)
wait_port 127.0.0.1 "$MEMCACHED_TLS_PORT" "memcached (TLS)"

export SLUICE_REDIS_TLS_ADDR=127.0.0.1:$REDIS_TLS_PORT
export SLUICE_MEMCACHED_TLS_ADDR=127.0.0.1:$MEMCACHED_TLS_PORT
export SLUICE_TLS_CA=$TLS_DIR/ca.pem
export SLUICE_TLS_CLIENT_CERT=$TLS_DIR/client.pem
export SLUICE_TLS_CLIENT_KEY=$TLS_DIR/client-key.pem

package main

import (
	"io"

	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/redis"
)

// quotaState sets the RLQS quota state of cfg from --quota-store: memory (the default) or a
// Redis URL (redis://, rediss://, redis-sentinel://, redis-cluster://) shared by replicas,
// reached with the store's TLS settings (--store-tls*).
func quotaState(cfg *server.Config, url string, t store.ClientTLS) (closeFn func(), err error) {
	if url == "" || url == "memory" {
		return func() {}, nil
	}
	tc, err := t.ClientConfig()
	if err != nil {
		return nil, err
	}
	st, err := redis.NewFromURL(url, redis.WithTLS(tc))
	if err != nil {
		return nil, err
	}
	ledger := rlqs.NewRedisLedger(st.Client(), "")
	cfg.Quota.Ledger = ledger
	return func() {
		if c, ok := ledger.(io.Closer); ok {
			_ = c.Close() // its pub/sub subscription, before the client
		}
		_ = st.Close()
	}, nil
}

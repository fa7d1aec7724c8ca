package main

import (
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store/redis"
)

// quotaState sets the RLQS quota state of cfg from --quota-store: memory (the default) or a
// Redis URL (redis://, rediss://, redis-sentinel://, redis-cluster://) shared by replicas.
func quotaState(cfg *server.Config, url string) (closeFn func(), err error) {
	if url == "" || url == "memory" {
		return func() {}, nil
	}
	st, err := redis.NewFromURL(url)
	if err != nil {
		return nil, err
	}
	cfg.Quota.Ledger = rlqs.NewRedisLedger(st.Client(), "")
	return func() { _ = st.Close() }, nil
}

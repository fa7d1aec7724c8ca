package server

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
)

// OpenStore opens the store named by rawURL: "memory" (or "memory://", or empty) for the
// embedded in-process store. The caller closes it (see sluice.Closer).
func OpenStore(rawURL string) (sluice.Store, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	switch scheme {
	case "", "memory":
		return memory.New()
	case "redis", "rediss", "redis-sentinel", "redis-cluster":
		return nil, fmt.Errorf("server: store %q: the Redis store is not built into this binary yet", scheme)
	default:
		return nil, fmt.Errorf("server: store: unknown scheme %q (want memory, redis://, rediss://, redis-sentinel:// or redis-cluster://)", scheme)
	}
}

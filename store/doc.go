// Package stores opens a sluice.Store from a URL, in a distribution mode, with a fallback
// policy: the one call the server (sluice serve), the simulator (sluice simulate) and library
// users make to get a store without composing decorators and ordering their Close by hand.
//
//	st, closer, err := store.Open(ctx, store.Config{
//		Backend:    store.Backend{URL: "redis://127.0.0.1:6379/0"},
//		Decorators: store.Decorators{Mode: "async", Fallback: "local"},
//	})
//	if err != nil {
//		return err
//	}
//	defer closer.Close() // flushes the decorators, then closes the store and its client
//	lim := sluice.New(st)
//
// A Config is the store (Backend) and the decorators in front of it (Decorators). The URL
// names the store: "memory" (also "" and "memory://"), or a Redis URL as
// redis.NewFromURL reads it (redis://, rediss://, redis-cluster://, redis-sentinel://), or a
// memcached URL as memcached.NewFromURL reads it (memcached://host:port,host:port).
// The mode is one of package distributed's decorators ("sync": none; "overlimit": denials
// cached, one store call at a time per key once denied; "async"),
// and the fallback wraps the result in distributed.NewFallback with a policy ("local",
// "fail_open", "fail_closed"). The composed store is returned as it is, so the optional
// interfaces of the outermost store (sluice.WindowCounter, sluice.Heartbeater,
// sluice.Flusher) stay visible.
//
// Package stores imports the Redis and memcached clients; importing package sluice alone does
// not.
package store

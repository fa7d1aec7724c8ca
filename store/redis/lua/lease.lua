-- Snippets of the lease scripts (lease_acquire.lua, lease_renew.lua), spliced by the generator.
--
-- lease_ttl() makes a lease set expire with its last lease: the highest score, at least
-- ttl_floor ms from now, plus SLACK, so no set outlives its leases for long and none lives for
-- ever.
--@define lease_ttl()
local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
local px = last - now_ms
if px < ttl_floor then px = ttl_floor end
redis.call('PEXPIRE', key, px + SLACK)
--@end

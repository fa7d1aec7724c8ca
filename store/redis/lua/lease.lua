-- Snippets of the lease scripts (lease_acquire.lua, lease_renew.lua), spliced by the generator.
--
-- lease_ttl(set) makes a set of ids scored by their expiry (ms) expire with its last one: the
-- highest score, at least ttl_floor ms from now, plus SLACK, so no set outlives its leases
-- (or reservations) for long and none lives for ever.
--@define lease_ttl(set)
local last = tonumber(redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')[2])
local px = last - now_ms
if px < ttl_floor then px = ttl_floor end
redis.call('PEXPIRE', set, px + SLACK)
--@end

-- ledger_ttl(set, records) is lease_ttl(set) for a budget key's reservations (budget.lua):
-- the hash of their records expires with the set of their expiries.
--@define ledger_ttl(set, records)
--@lease_ttl(set)
redis.call('PEXPIRE', records, px + SLACK)
--@end

-- Window counters of one key (sluice.CounterStore, used by distributed.Async).
-- KEYS: one key per window, all with the same hash tag (one Cluster slot).
-- ARGV: 1 TTL in ms, then one delta per key. A non-zero delta is added (INCRBY) and renews the
-- TTL; a zero delta only reads. Returns the totals, one per key.
local ttl = tonumber(ARGV[1])
local out = {}
for i, k in ipairs(KEYS) do
  local d = tonumber(ARGV[i + 1])
  if d ~= 0 then
    out[i] = redis.call('INCRBY', k, d)
    redis.call('PEXPIRE', k, ttl)
  else
    out[i] = tonumber(redis.call('GET', k) or '0')
  end
end
return out

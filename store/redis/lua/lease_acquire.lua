-- Acquire one slot of a concurrency limit (sluice.Leaser.AcquireLease), mirroring Go's
-- algorithm.DecideLease. The key is a sorted set of lease ids scored by their expiry (script
-- clock, ms). P1 is the limit, P2 the holdback (slots that must stay free after this one), P3
-- the lease in ms; X1 the new lease's id. Expired leases (expiry <= now) are dropped first. The
-- key expires with its last lease (at least ttl_floor ms from now), plus SLACK. Reply: admitted
-- (0/1), in flight, remaining, retry-after in ns (-1: never).
redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
local live = redis.call('ZCARD', key)
local room = P1 - P2
local admitted, retry = 0, 0
if live + 1 <= room then
  admitted = 1
  live = live + 1
  redis.call('ZADD', key, now_ms + P3, X1)
elseif room < 1 then
  retry = -1
else
  local soonest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  retry = (soonest - now_ms) * MS - now_sub -- exact: each term below 2^53
  if retry < 1 then retry = 1 end
end
local remaining = room - live
if remaining < 0 then remaining = 0 end
if live > 0 then
  --@lease_ttl(key)
end
return {admitted, live, remaining, retry}

-- Renew leases of one key (sluice.Leaser.RenewLeases): every id of ARGV[2..] that is live
-- (expiry > now) expires P1 ms from now; one that expired or was released is not brought back
-- (its slot may be someone else's). Expired leases are dropped. Reply: 1 (renewed) or 0 per id.
local out = {}
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', key, ARGV[i])
  if score and tonumber(score) > now_ms then
    redis.call('ZADD', key, 'XX', now_ms + P1, ARGV[i])
    out[i - 1] = 1
  else
    out[i - 1] = 0
  end
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
if redis.call('ZCARD', key) > 0 then
  --@lease_ttl(key)
end
return out

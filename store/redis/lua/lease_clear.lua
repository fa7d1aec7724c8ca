-- Clear every lease of a key (sluice.LeaseClearer.ClearLeases): an operator's way to free the
-- slots of holders that died holding long leases. Their holders are not told: a renewal finds
-- its lease gone, a release does nothing. Reply: how many leases were live (expiry > now).
local live = redis.call('ZCOUNT', key, '(' .. now_ms, '+inf')
redis.call('DEL', key)
return live

-- Instance heartbeat (sluice.InstanceRegistry, used by distributed.Fallback).
-- KEYS[1]: the group's sorted set (member: instance id, score: expiry in server ms).
-- ARGV: 1 instance id, 2 TTL in ms. Marks the instance live, drops expired ones, returns how
-- many are live. The set itself expires with its newest heartbeat.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return redis.call('ZCARD', KEYS[1])

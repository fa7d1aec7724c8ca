-- Criticality variant of a script (scripts.go assembles it like multi.lua: the prelude's
-- constants, the algorithm's helpers, this file with the algorithm's body in place of the
-- "--@body" line). It mirrors algorithm.TakeReserved: ARGV[1] are the single script's packed
-- parameters for a take of n + reserve (P1, the cost, is the first parameter of every
-- algorithm), ARGV[2] the reserve, ARGV[3] the algorithm's extra argument. When the take is
-- admitted the reserve is given back at once (the same body with P1 = -reserve), so the key
-- moves as a take of n would and a denied request consumes nothing; the reply's remaining is
-- what is left above the reserve.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1)
--@body
end

local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[1])
if ttl_floor == 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
end
local reserve = tonumber(ARGV[2])
local allowed, remaining, retry, reset, delay = struct.unpack('<ddddd',
  decide(KEYS[1], now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, ARGV[3]))
if allowed == 1 then
  local _, back_remaining, _, back_reset = struct.unpack('<ddddd',
    decide(KEYS[1], now_ms, now_sub, ttl_floor, -reserve, P2, P3, P4, P5, P6, P7, ARGV[3]))
  remaining, reset = back_remaining, back_reset
end
remaining = remaining - reserve
if remaining < 0 then remaining = 0 end
return struct.pack('<ddddd', allowed, remaining, retry, reset, delay)

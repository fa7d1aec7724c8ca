-- Criticality variant of a script (go generate assembles it like multi.lua: the prelude's
-- constants, the algorithm's helpers, this file with the algorithm's body in place of the
-- "--@body" line, and the prelude's arguments of one decision in place of "--@single"). It
-- mirrors algorithm.TakeReserved: ARGV[1] are the single script's packed parameters for a take
-- of n + reserve (P1, the cost, is the first parameter of every algorithm), ARGV[2] the
-- algorithm's extra argument (X1), ARGV[3] the reserve. When the take is
-- admitted the reserve is given back at once (the same body with P1 = -reserve), so the key
-- moves as a take of n would and a denied request consumes nothing; the reply's remaining is
-- what is left above the reserve.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1)
--@body
end

--@single
local reserve = tonumber(ARGV[3])
local allowed, remaining, retry, reset, delay = struct.unpack('<ddddd',
  decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1))
if allowed == 1 then
  local _, back_remaining, _, back_reset = struct.unpack('<ddddd',
    decide(key, now_ms, now_sub, ttl_floor, -reserve, P2, P3, P4, P5, P6, P7, X1))
  remaining, reset = back_remaining, back_reset
end
remaining = remaining - reserve
if remaining < 0 then remaining = 0 end
return struct.pack('<ddddd', allowed, remaining, retry, reset, delay)

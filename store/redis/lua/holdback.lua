-- Criticality variant of a script (go generate assembles it like multi.lua: the prelude's
-- constants, the algorithm's helpers, this file with the algorithm's body in place of the
-- "--@body" line, and the prelude's arguments of one decision in place of "--@single"). It
-- mirrors algorithm.TakeHoldback: ARGV[1] are the single script's packed parameters for a take
-- of n + holdback (P1, the cost, is the first parameter of every algorithm), ARGV[2] a slot
-- no script reads, ARGV[3] the holdback, ARGV[4] the window (ms) a fixed
-- window paces the class's share over (0: no pace) and ARGV[5] the capacity. The take holds
-- back `held`: the holdback, or in a fixed window the capacity minus the class's share paced by
-- the part of the window begun, in whole ms counting the current one, plus a lead of 1/16 of
-- the window (algorithm.TakeHoldback). When the take is admitted `held` is given back at once
-- (the same body with P1 = -held), so the key moves as a take of n would and a denied request
-- consumes nothing; a refused request of a paced class retries at the first ms whose paced
-- share covers it (in this window or the next); the reply's remaining is what is left above `held`.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, got)
--@body
end

--@single
local holdback, pms, capacity = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = P1 - holdback
local held, share, elapsed, lead = holdback, 0, 0, 0
if pms > 0 and holdback < capacity then
  share = capacity - holdback
  elapsed = now_ms % pms
  lead = floor(pms / 16)
  local begun = elapsed + 1 + lead
  if begun > pms then begun = pms end
  local paced, paced_r
  --@muldiv(paced, paced_r, share, begun, pms)
  held = capacity - paced
end
local allowed, remaining, retry, reset = struct.unpack('<ddddd',
  decide(key, now_ms, now_sub, ttl_floor, n + held, P2, P3, P4, P5, P6, P7, got))
if allowed == 1 then
  local _, back_remaining, _, back_reset = struct.unpack('<ddddd',
    decide(key, now_ms, now_sub, ttl_floor, -held, P2, P3, P4, P5, P6, P7, got))
  remaining, reset = back_remaining, back_reset
elseif n <= share then -- share is 0 unless paced
  -- the first ms k of this window (or the next, whose count starts from 0) at which the
  -- paced share covers the count and n
  local base, need = 0, capacity - remaining + n
  if need > share then base, need = pms, n end
  local k, k_r
  --@muldiv(k, k_r, need, pms, share)
  if k_r > 0 then k = k + 1 end
  k = k - lead - 1
  if k < 0 then k = 0 end
  retry = (base + k - elapsed) * MS - now_sub
end
remaining = remaining - held
if remaining < 0 then remaining = 0 end
-- a take with a holdback never waits (no delay), and its body's next-unit time (a window's,
-- for the take of n + held before the give-back) is not the key's: 0
return struct.pack('<ddddd', allowed, remaining, retry, reset, 0)

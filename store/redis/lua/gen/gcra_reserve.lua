-- Prelude of every Sluice script. The Go package assembles each script (scripts.go): this
-- file's constants, then the algorithm file's helpers (the part above its "--@decide" line, if
-- any: functions of their arguments only, defined once per script), then this file's part
-- below "--@single" (the arguments of one decision) and the algorithm's body, which decides
-- for `key` and returns the reply. The batched variant (multi.lua) puts the body in a function
-- instead, called once per key. Code that several scripts share is written once, as a snippet
-- that scripts.go splices inline where a line calls it, "--@name(arguments)": persist.lua
-- writes a state with its TTL, muldiv.lua divides an exact product.
--
-- Conventions: KEYS[1] is the only key (one hash tag per decision). ARGV[1] holds every
-- parameter as ten little-endian doubles (one struct.unpack instead of a tonumber per
-- argument): the client clock as Unix milliseconds and the nanoseconds within that
-- millisecond, the shortest TTL in ms (0 reads the Redis server clock, TIME, and ignores the
-- two clock values; with a client clock, which need not run at the server's rate, it is
-- more), then the algorithm's own parameters, P1 to P6 (zeros past the last), then P7: 0 for
-- a decision, and for a settle (sluice.Request.Settle: n applied whatever the limit) the most
-- units it may charge past the capacity (algorithm.MaxDebt, at least 1). Every body
-- applies a refund (n < 0) or a settle first and then decides as a peek (n = 0), as
-- algorithm.settle does; the reply is then allowed, with retry-after 0 for a refund and, for
-- a settle, the peek's: how long until the debt is paid. ARGV[2], X1 in
-- the body, is an algorithm's extra argument (the sliding window's struct format). Times are
-- (ms, sub-ms ns) pairs so every value stays an exact integer in Lua's doubles; durations are
-- nanoseconds. The reply is one string, five little-endian doubles: allowed (0/1), remaining,
-- and retry-after, reset-after and delay in ns, saturating like package algorithm's
-- arithmetic (retry -1 is never).
--
-- Cost: the bodies make no closure (the sliding log's excepted) and the GCRA and fixed window
-- ones no table, call Redis twice (GET, then SET only when the state changed) and skip TIME
-- when the client passes the time. States carry the instant their key expires (script clock,
-- ms): while it covers what the state needs, and by at most SLACK more, the state is rewritten
-- with KEEPTTL, which costs Redis far less than PX; otherwise PX sets a TTL of what the state
-- needs plus SLACK (persist.lua). So no key lives more than SLACK ms longer than its state
-- matters, and none lives for ever.
--
-- Each script mirrors one state machine of Sluice's Go package algorithm, step for step.
local floor = math.floor
local MS = 1000000        -- ns per ms
local SCALE = 1000000000  -- fixed-point sub-units per unit (algorithm.Scale)
local EXACT = 4503599627370496 -- 2^52: products below it are exact in a double
local GRACE = 1000        -- ms a drained state is kept, so a clock stepping back sees it
local SLACK = 1000        -- ms a TTL may exceed what the state needs (see above)
local MAXD = 9223372036854774784 -- largest double below 2^63: durations saturate there
local MAX_TTL = 63244800000 -- ms, twice sluice.MaxPeriod: no state is kept longer


-- Criticality variant of a script (scripts.go assembles it like multi.lua: the prelude's
-- constants, the algorithm's helpers, this file with the algorithm's body in place of the
-- "--@body" line, and the prelude's arguments of one decision in place of "--@single"). It
-- mirrors algorithm.TakeReserved: ARGV[1] are the single script's packed parameters for a take
-- of n + reserve (P1, the cost, is the first parameter of every algorithm), ARGV[2] the
-- algorithm's extra argument (X1), ARGV[3] the reserve. When the take is
-- admitted the reserve is given back at once (the same body with P1 = -reserve), so the key
-- moves as a take of n would and a denied request consumes nothing; the reply's remaining is
-- what is left above the reserve.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1)
-- GCRA (algorithm/gcra.go). Parameters: n, max delay ns, interval T ns, window ns
-- (capacity x T), capacity; P7 the settle's debt bound (see prelude.lua). State: byte 'g', TAT
-- (ms, sub-ms ns), key expiry ms.
local n, max_delay, t, window, capacity, debt = P1, P2, P3, P4, P5, P7

local ahead = 0 -- max(TAT, now) - now, ns
local stale = false -- TAT is before now: an admitted request moves it to now
local tag, ms, sub, exp = 0, 0, 0, 0
local v = redis.pcall('GET', key)
if v then
  if #v == 25 then tag, ms, sub, exp = struct.unpack('<Bddd', v) end
  if tag == 103 then
    ahead = (ms - now_ms) * MS + (sub - now_sub)
    if ahead < 0 then ahead, stale = 0, true end
  else -- another algorithm's state (or type): a new algorithm starts from full
    redis.call('DEL', key)
    v, exp = false, 0 -- not that state's expiry: SET KEEPTTL would leave the new key none
  end
end

-- a refund, or a settle (a charge past the limit: TAT pushed up to debt x T past the burst
-- window), applies n; then the decision is a peek's
local applied = n < 0 or debt > 0
local moved = applied and n ~= 0
if applied then
  if n > 0 then
    if n > capacity + debt then n = capacity + debt end
    local a = ahead + n * t
    local most = window + debt * t
    if a > most then a = most end
    if a > ahead then ahead = a end
  elseif n < 0 then
    ahead = ahead + n * t
    if ahead < 0 then ahead = 0 end
  end
  n = 0
end

local allowed, retry, delay = 0, 0, 0
if n > capacity then
  retry = -1
else
  local nxt = ahead + n * t
  local wait = nxt - window
  if wait <= 0 then
    ahead, allowed = nxt, 1
  elseif max_delay > 0 and wait <= max_delay then
    ahead, allowed, delay = nxt, 1, wait
  else
    retry = wait - max_delay
  end
end
-- Go sets TAT on every admitted request (even a peek): a TAT at now still matters to a clock
-- that steps back, so a state back to full is kept for the grace period.
if (moved or allowed == 1 and (n ~= 0 or stale)) and (ahead > 0 or v) then
  local s = now_sub + ahead
  local c = floor(s / MS)
  local r = s - c * MS
  if r < 0 then c = c - 1; r = r + MS elseif r >= MS then c = c + 1; r = r - MS end
  local need = GRACE
  if ahead > 0 then -- ceil(ahead / MS)
    need = floor(ahead / MS)
    if need * MS < ahead then need = need + 1 end
  end
  if need < ttl_floor then need = ttl_floor end
  local life = now_ms + need
  if exp >= life and exp <= life + SLACK then
    redis.call('SET', key, struct.pack('<Bddd', 103, now_ms + c, r, exp), 'KEEPTTL')
  else
    local px = need + SLACK
    if px > MAX_TTL then px = MAX_TTL end
    exp = now_ms + px
    redis.call('SET', key, struct.pack('<Bddd', 103, now_ms + c, r, exp), 'PX', px)
  end
end

-- remaining = floor(max(0, window - ahead) / T), exact (muldiv.lua, inline)
local remaining = 0
local room = window - ahead
if room > 0 then
  local rem
  do
    local p = room * 1
    remaining = floor(p / t)
    if p < EXACT then
      rem = p - remaining * t
    else
      local qc = remaining * t
      local x = 134217729 * room
      local ah = x - (x - room)
      x = 134217729 * 1
      local bh = x - (x - 1)
      local pe = ((ah * bh - p) + ah * (1 - bh) + (room - ah) * bh) + (room - ah) * (1 - bh)
      x = 134217729 * remaining
      local qh = x - (x - remaining)
      x = 134217729 * t
      local ch = x - (x - t)
      local qe = ((qh * ch - qc) + qh * (t - ch) + (remaining - qh) * ch) + (remaining - qh) * (t - ch)
      rem = (p - qc) + (pe - qe)
    end
    while rem < 0 do remaining = remaining - 1; rem = rem + t end
    while rem >= t do remaining = remaining + 1; rem = rem - t end
  end
end
if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed, delay = 1, 0
  if debt == 0 then retry = 0 end
end
if retry > MAXD then retry = MAXD end
if ahead > MAXD then ahead = MAXD end
if delay > MAXD then delay = MAXD end
return struct.pack('<ddddd', allowed, remaining, retry, ahead, delay)

end

local key = KEYS[1]
local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[1])
if ttl_floor == 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
end
local X1 = ARGV[2]

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

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


-- Batched variant of a script (scripts.go assembles it: the prelude's constants, the
-- algorithm's helpers, this file with the algorithm's body in place of the "--@body" line).
-- KEYS are K keys of one Cluster slot; ARGV[i] is key i's packed parameters (see prelude.lua)
-- and, for an algorithm with an extra argument, ARGV[K + i] is key i's. The server clock is
-- read once, when the first key asks for it. The body is one function, defined once, called
-- for each key in order, exactly as the single script would run it alone at that instant, so
-- a key given twice sees its first decision. The reply is the K replies of 40 bytes, in order,
-- as one string. A Redis error stops the script: the keys before it have been decided.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1)
-- Fixed window (algorithm/fixedwindow.go). Parameters: n, limit, period ms; P7 the settle's
-- debt bound (see prelude.lua). State: byte 'f', window end ms, count, key expiry ms.
local n, limit, pms, debt = P1, P2, P3, P7

local tag, end_ms, count, exp = 0, 0, 0, 0
local dirty = false
local v = redis.pcall('GET', key)
if v then
  if #v == 25 then tag, end_ms, count, exp = struct.unpack('<Bddd', v) end
  if tag ~= 102 then -- another algorithm's state (or type): a new algorithm starts from full
    redis.call('DEL', key)
    v, exp = false, 0
  end
end
if not v or now_ms >= end_ms then -- a new window; a clock gone backwards stays in this one
  local w = floor(now_ms / pms) -- now_ms < 2^53: exact up to the off-by-one fixed here
  if w * pms > now_ms then w = w - 1 elseif (w + 1) * pms <= now_ms then w = w + 1 end
  end_ms = w * pms + pms
  count = 0
  dirty = v ~= false
end

-- a refund, or a settle (a charge past the limit: a debt in this window, up to debt units
-- past it), applies n; then the decision is a peek's
local applied = n < 0 or debt > 0
local moved = applied and n ~= 0
if applied then
  if n > 0 then
    local c = count + n
    if c > limit + debt then c = limit + debt end
    if c > count then count = c end
  elseif n < 0 then
    count = count + n
    if count < 0 then count = 0 end
  end
  n = 0
end

local allowed, retry = 0, 0
if n > limit then
  retry = -1
elseif count + n <= limit then
  count = count + n
  allowed = 1
else
  retry = (end_ms - now_ms) * MS - now_sub
end
if (moved or allowed == 1 and n ~= 0) and (v or count > 0) then
  dirty = true
end
if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed = 1
  if debt == 0 then retry = 0 end
end
if dirty then
  -- the window's end bounds the state's life (it matters until then even when empty)
  local need = end_ms - now_ms
  if need < 1 then need = 1 end
  if need < ttl_floor then need = ttl_floor end
  local life = now_ms + need
  if exp >= life and exp <= life + SLACK then
    redis.call('SET', key, struct.pack('<Bddd', 102, end_ms, count, exp), 'KEEPTTL')
  else
    local px = need + SLACK
    if px > MAX_TTL then px = MAX_TTL end
    exp = now_ms + px
    redis.call('SET', key, struct.pack('<Bddd', 102, end_ms, count, exp), 'PX', px)
  end
end
local reset = 0
if count > 0 then reset = (end_ms - now_ms) * MS - now_sub end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
return struct.pack('<ddddd', allowed, remaining, retry, reset, 0)

end

local k = #KEYS
local out = {}
local t_ms, t_sub
for i = 1, k do
  local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[i])
  if ttl_floor == 0 then
    if not t_ms then
      local t = redis.call('TIME')
      local us = tonumber(t[2])
      t_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
      t_sub = (us % 1000) * 1000
    end
    now_ms, now_sub = t_ms, t_sub
  end
  out[i] = decide(KEYS[i], now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, ARGV[k + i])
end
return table.concat(out)

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

-- muldiv returns floor(a*b/c) and a*b mod c, exactly, for integers a, b >= 0 and c > 0
-- whose quotient is below 2^53 (the mulDiv of package algorithm); below 2^52 a product is
-- exact and one division does (Dekker's two-product corrects the rest). scripts.go puts the
-- function among the helpers of the scripts calling it (the bucket and the sliding window),
-- defined once per script call, and splices the snippet below inline where a line holds
-- "--@muldiv(q, r, a, b, c)" (GCRA, whose path defines no function).
local function muldiv(a, b, c)
  local q, r
  do
    local p = a * b
    q = floor(p / c)
    if p < EXACT then
      r = p - q * c
    else
      local qc = q * c
      local x = 134217729 * a
      local ah = x - (x - a)
      x = 134217729 * b
      local bh = x - (x - b)
      local pe = ((ah * bh - p) + ah * (b - bh) + (a - ah) * bh) + (a - ah) * (b - bh)
      x = 134217729 * q
      local qh = x - (x - q)
      x = 134217729 * c
      local ch = x - (x - c)
      local qe = ((qh * ch - qc) + qh * (c - ch) + (q - qh) * ch) + (q - qh) * (c - ch)
      r = (p - qc) + (pe - qe)
    end
    while r < 0 do q = q - 1; r = r + c end
    while r >= c do q = q + 1; r = r - c end
  end
  return q, r
end


-- Token bucket and leaky bucket (algorithm/bucket.go: level.decide). Parameters: n, max delay
-- ns, limit, period ms, capacity, 1 for the leaky bucket's queue discipline (else 0); P7 the
-- settle's debt bound (see prelude.lua).
-- State: byte 't' or 'l', last (ms, sub-ms ns), level units U and sub-units F (the Go
-- fixed-point level is U x 1e9 + F, kept in two parts so it stays exact), key expiry ms.
-- Helpers (defined once per script; muldiv comes from muldiv.lua), then, below "--@decide",
-- the body (see prelude.lua).

-- time_for: ns to drain xu x 1e9 + xf sub-units at limit per period ns (pms ms), rounded up
-- (timeFor), saturating.
local function time_for(xu, xf, period, limit, pms)
  if xu < 0 or (xu == 0 and xf <= 0) then return 0 end
  local qa, ra = muldiv(xu, period, limit)
  local m = limit * 1000
  local qb, rb = muldiv(xf, pms, m)
  local s = ra * 1000 + rb
  local x = qa + qb
  if s > m then x = x + 2 elseif s > 0 then x = x + 1 end
  if x > MAXD then return MAXD end
  return x
end

-- Batched variant of a script (scripts.go assembles it: the prelude's constants, the
-- algorithm's helpers, this file with the algorithm's body in place of the "--@body" line).
-- KEYS are K keys of one Cluster slot; ARGV[i] is key i's packed parameters (see prelude.lua)
-- and, for an algorithm with an extra argument, ARGV[K + i] is key i's. The server clock is
-- read once, when the first key asks for it. The body is one function, defined once, called
-- for each key in order, exactly as the single script would run it alone at that instant, so
-- a key given twice sees its first decision. The reply is the K replies of 40 bytes, in order,
-- as one string. A Redis error stops the script: the keys before it have been decided.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, X1)
local n, max_delay, limit, pms, capacity, queue, debt = P1, P2, P3, P4, P5, P6, P7
local period = pms * MS
local want = 116 -- 't'
if queue == 1 then want = 108 end -- 'l'
queue = queue == 1

local tag, last_ms, last_sub, U, F, exp = 0, now_ms, now_sub, 0, 0, 0
local dirty = false
local v = redis.pcall('GET', key)
if v then
  if #v == 41 then tag, last_ms, last_sub, U, F, exp = struct.unpack('<Bddddd', v) end
  if tag ~= want then -- another algorithm's state (or type): a new algorithm starts from full
    redis.call('DEL', key)
    v = false
    last_ms, last_sub, U, F, exp = now_ms, now_sub, 0, 0, 0
  else
    -- drain: level -= floor(elapsed x limit x 1e9 / period), never below 0; Last only moves on.
    local e = (now_ms - last_ms) * MS + (now_sub - last_sub)
    if e > 0 then
      if U > 0 or F > 0 then
        if e * limit / period > U + 2 then
          U, F = 0, 0
        else
          -- drained = q x 1000 + floor(r x 1000 / pms), q and r from muldiv(e, limit, pms),
          -- inline: the common path calls no function
          local q, r
          do
            local p = e * limit
            q = floor(p / pms)
            if p < EXACT then
              r = p - q * pms
            else
              local qc = q * pms
              local x = 134217729 * e
              local ah = x - (x - e)
              x = 134217729 * limit
              local bh = x - (x - limit)
              local pe = ((ah * bh - p) + ah * (limit - bh) + (e - ah) * bh) + (e - ah) * (limit - bh)
              x = 134217729 * q
              local qh = x - (x - q)
              x = 134217729 * pms
              local ch = x - (x - pms)
              local qe = ((qh * ch - qc) + qh * (pms - ch) + (q - qh) * ch) + (q - qh) * (pms - ch)
              r = (p - qc) + (pe - qe)
            end
            while r < 0 do q = q - 1; r = r + pms end
            while r >= pms do q = q + 1; r = r - pms end
          end
          local du = floor(q / 1000000)
          local df = (q - du * 1000000) * 1000 + floor(r * 1000 / pms)
          U, F = U - du, F - df
          if F < 0 then U, F = U - 1, F + SCALE end
          if U < 0 then U, F = 0, 0 end
        end
      end
      last_ms, last_sub, dirty = now_ms, now_sub, true
    end
  end
end

-- a refund, or a settle (a charge past the limit: a level above the capacity, up to debt
-- units past it, which the drain pays), applies n; then the decision is a peek's
local applied = n < 0 or debt > 0
local moved = applied and n ~= 0
if applied then
  if n > 0 then
    local most = capacity + debt
    local u, f = U + n, F
    if u > most or (u == most and f > 0) then u, f = most, 0 end
    if u > U or (u == U and f > F) then U, F = u, f end
  elseif n < 0 then
    U = U + n
    if U < 0 then U, F = 0, 0 end
  end
  n = 0
end

local allowed, retry, delay = 0, 0, 0
if n > capacity then
  retry = -1
else
  local ou = U + n - capacity -- over = ou x 1e9 + F: units that do not fit now
  local fits = ou < 0 or (ou == 0 and F == 0)
  if fits and (max_delay == 0 or not queue) then
    allowed = 1
  elseif max_delay > 0 and queue and fits and time_for(U, F, period, limit, pms) <= max_delay then
    allowed, delay = 1, time_for(U, F, period, limit, pms)
  elseif max_delay > 0 and not queue and time_for(ou, F, period, limit, pms) <= max_delay then
    allowed, delay = 1, time_for(ou, F, period, limit, pms)
  else
    local wait = time_for(ou, F, period, limit, pms)
    if max_delay > 0 then
      if queue then
        wait = math.max(wait, time_for(U, F, period, limit, pms) - max_delay)
      else
        wait = wait - max_delay
      end
    end
    if wait < 1 then wait = 1 end
    retry = wait
  end
  if allowed == 1 then U = U + n end
end
if moved or allowed == 1 and n ~= 0 then
  dirty = v ~= false or U ~= 0 or F ~= 0 -- nothing to keep for a key full before and after
end
if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed, delay = 1, 0
  if debt == 0 then retry = 0 end
end
-- reset = time_for(U, F, period, limit, pms), inline while the products are exact
local reset = 0
if U > 0 or F > 0 then
  local a, b, m = U * period, F * pms, limit * 1000
  if U >= 0 and a < EXACT and b < EXACT then
    local qa = floor(a / limit)
    local ra = a - qa * limit
    if ra < 0 then qa, ra = qa - 1, ra + limit elseif ra >= limit then qa, ra = qa + 1, ra - limit end
    local qb = floor(b / m)
    local rb = b - qb * m
    if rb < 0 then qb, rb = qb - 1, rb + m elseif rb >= m then qb, rb = qb + 1, rb - m end
    local s = ra * 1000 + rb
    reset = qa + qb
    if s > m then reset = reset + 2 elseif s > 0 then reset = reset + 1 end
  else
    reset = time_for(U, F, period, limit, pms)
  end
end
if dirty then
  local need = GRACE
  if reset > 0 then -- ceil(reset / MS)
    need = floor(reset / MS)
    if need * MS < reset then need = need + 1 end
  end
  if need < ttl_floor then need = ttl_floor end
  local life = now_ms + need
  if exp >= life and exp <= life + SLACK then
    redis.call('SET', key, struct.pack('<Bddddd', want, last_ms, last_sub, U, F, exp), 'KEEPTTL')
  else
    local px = need + SLACK
    if px > MAX_TTL then px = MAX_TTL end
    exp = now_ms + px
    redis.call('SET', key, struct.pack('<Bddddd', want, last_ms, last_sub, U, F, exp), 'PX', px)
  end
end
local remaining = capacity - U
if F > 0 then remaining = remaining - 1 end
if remaining < 0 then remaining = 0 end
return struct.pack('<ddddd', allowed, remaining, retry, reset, delay)

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

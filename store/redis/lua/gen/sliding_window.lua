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


-- Sliding window (algorithm/slidingwindow.go). Parameters: n, limit, sub-windows N,
-- sub-window length ms; P7 the settle's debt bound (see prelude.lua); X1, the extra argument,
-- is the state's struct format ('<Bdddd' and
-- N+1 'd'). State: byte 'w', sub ms, cur, N, key expiry ms, then N+1 counters: sub-window w's
-- at index w mod (N+1). The state lives in one table t (t[6 + w mod (N+1)] is sub-window w's
-- counter) and the common path inlines what the Go code does in helpers.
-- Its helper muldiv (muldiv.lua) is defined once per script; below "--@decide", the body (see
-- prelude.lua).

local key = KEYS[1]
local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[1])
if ttl_floor == 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
end
local X1 = ARGV[2]

local n, limit, windows, sub_ms, debt = P1, P2, P3, P4, P7
local fmt = X1
local size = windows + 1
local sub = sub_ms * MS

local nms, nsub = now_ms, now_sub -- now, moved to the newest sub-window's start if behind it
local t
local exp = 0
local dirty = false
local v = redis.pcall('GET', key)
if v then
  local len = #v
  local nw = (len - 33) / 8 - 1
  if len == 33 + 8 * size then
    t = {struct.unpack(fmt, v)}
  elseif len >= 49 and nw == floor(nw) then -- another N: a reshape
    t = {struct.unpack('<Bdddd' .. string.rep('d', nw + 1), v)}
  end
  if t and t[1] == 119 and t[4] == nw then
    t[7 + nw] = nil -- struct.unpack's next position
    exp = t[5]
  else -- another algorithm's state (or type): a new algorithm starts from full
    redis.call('DEL', key)
    v, t = false, nil
  end
end

if not v or t[4] ~= windows or t[2] ~= sub_ms then -- reshape, carrying the estimate
  local carried = 0
  if v then
    local s_sub_ms, ocur, osize = t[2], t[3], t[4] + 1
    local w = (muldiv(nms, 1, s_sub_ms))
    if w < ocur then w, nms, nsub = ocur, ocur * s_sub_ms, 0 end
    if w > ocur then
      for i = ocur + 1, math.min(w, ocur + osize) do t[6 + i % osize] = 0 end
      ocur = w
    end
    local recent = 0
    for j = ocur - osize + 2, ocur do recent = recent + t[6 + j % osize] end
    local old = t[6 + (ocur - osize + 1) % osize]
    local f = (nms - ocur * s_sub_ms) * MS + nsub
    carried = recent
    if old > 0 then
      local sb = s_sub_ms * MS
      local q, r = muldiv(old, sb - f, sb)
      if r > 0 then q = q + 1 end
      carried = carried + q
    end
    dirty = true
  end
  t = {119, sub_ms, 0, windows, exp}
  for i = 1, size do t[5 + i] = 0 end
  local c = (muldiv(nms, 1, sub_ms))
  t[3] = c
  t[6 + c % size] = carried
end

local cur = t[3]
-- a settle of n ~= 0 decides after the reshape as a call of its own (algorithm.settle): at
-- now, or the newest sub-window's start if the clock went back before it, not the old one's
if debt > 0 and n ~= 0 then nms, nsub = now_ms, now_sub end
local w = floor(nms / sub_ms) -- nms < 2^53: exact up to the off-by-one fixed here
if w * sub_ms > nms then w = w - 1 elseif (w + 1) * sub_ms <= nms then w = w + 1 end
if w < cur then w, nms, nsub = cur, cur * sub_ms, 0 end -- the clock went backwards
if w > cur then -- w becomes the newest sub-window; the ones in between are zeroed
  local last = cur + size
  if w < last then last = w end
  for i = cur + 1, last do t[6 + i % size] = 0 end
  cur, dirty = w, true
  t[3] = cur
end

-- the estimate: the N newest sub-windows' sum, plus ceil(old x (sub - f) / sub), the part of
-- the oldest sub-window still inside (f: now's offset into sub-window cur, ns)
local recent = 0
for j = cur - size + 2, cur do recent = recent + t[6 + j % size] end
local old = t[6 + (cur - size + 1) % size]
local f = (nms - cur * sub_ms) * MS + nsub
local used = recent
if old > 0 then
  local q, r -- muldiv(old, sub - f, sub), inline: the common path calls no function
  do
    local p = old * (sub - f)
    q = floor(p / sub)
    if p < EXACT then
      r = p - q * sub
    else
      local qc = q * sub
      local x = 134217729 * old
      local ah = x - (x - old)
      x = 134217729 * (sub - f)
      local bh = x - (x - (sub - f))
      local pe = ((ah * bh - p) + ah * ((sub - f) - bh) + (old - ah) * bh) + (old - ah) * ((sub - f) - bh)
      x = 134217729 * q
      local qh = x - (x - q)
      x = 134217729 * sub
      local ch = x - (x - sub)
      local qe = ((qh * ch - qc) + qh * (sub - ch) + (q - qh) * ch) + (q - qh) * (sub - ch)
      r = (p - qc) + (pe - qe)
    end
    while r < 0 do q = q - 1; r = r + sub end
    while r >= sub do q = q + 1; r = r - sub end
  end
  if r > 0 then q = q + 1 end
  used = used + q
end

-- a refund, or a settle (a charge past the limit: a count above it in the newest
-- sub-window, up to an estimate of debt units past it), applies n; then the decision is a
-- peek's
local applied = n < 0 or debt > 0
if applied then
  if n > 0 then
    local m = limit + debt - used
    if n < m then m = n end
    if m > 0 then
      local i = 6 + cur % size
      t[i] = t[i] + m
      recent, used, dirty = recent + m, used + m, true
    end
  elseif n < 0 then
    local m = -n
    for j = cur, cur - size + 1, -1 do -- newest sub-windows first
      if m <= 0 then break end
      local i = 6 + j % size
      local take = math.min(t[i], m)
      t[i], m = t[i] - take, m - take
    end
    dirty = true
    recent = 0
    for j = cur - size + 2, cur do recent = recent + t[6 + j % size] end
    old = t[6 + (cur - size + 1) % size]
    used = recent
    if old > 0 then
      local q, r = muldiv(old, sub - f, sub)
      if r > 0 then q = q + 1 end
      used = used + q
    end
  end
  n = 0
end

local allowed, retry = 0, 0
if n > limit then
  retry = -1
elseif used + n <= limit then
  if n > 0 then
    local i = 6 + w % size
    t[i] = t[i] + n
    used, dirty = used + n, true
  end
  allowed = 1
else
  -- retry-after: the first instant the estimate leaves room for n (limit - n used)
  local need = limit - n
  local rc, od = recent, old
  retry = ((cur + windows + 1) * sub_ms - nms) * MS - nsub
  for k = 0, windows + 1 do
    local wk = cur + k
    if rc <= need then
      local fk = 0
      if od > 0 and need - rc < od then
        fk = sub - muldiv(need - rc, sub, od)
      end
      if k == 0 and f > fk then fk = f end
      if fk < sub then
        retry = (wk * sub_ms - nms) * MS + fk - nsub
        break
      end
    end
    local leaving = 0
    local j = wk - windows + 1
    if j <= cur then leaving = t[6 + j % size] end
    rc, od = rc - leaving, leaving
  end
end

if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed = 1
  if debt == 0 then retry = 0 end
end

-- reset-after: when the newest non-empty sub-window leaves the window
local reset = 0
for j = cur, cur - windows, -1 do
  if t[6 + j % size] ~= 0 then
    reset = ((j + windows + 1) * sub_ms - nms) * MS - nsub
    break
  end
end
if (dirty and v) or reset > 0 and (dirty or not v) then
  -- the recorded expiry is t[5] (exp), which the packed state holds
  local need = GRACE
  if reset > 0 then -- ceil(reset / MS)
    need = floor(reset / MS)
    if need * MS < reset then need = need + 1 end
  end
  if need < ttl_floor then need = ttl_floor end
  local life = now_ms + need
  if t[5] >= life and t[5] <= life + SLACK then
    redis.call('SET', key, struct.pack(fmt, unpack(t, 1, 5 + size)), 'KEEPTTL')
  else
    local px = need + SLACK
    if px > MAX_TTL then px = MAX_TTL end
    t[5] = now_ms + px
    redis.call('SET', key, struct.pack(fmt, unpack(t, 1, 5 + size)), 'PX', px)
  end
end
local remaining = limit - used
if remaining < 0 then remaining = 0 end
if retry > MAXD then retry = MAXD end
if reset > MAXD then reset = MAXD end
return struct.pack('<ddddd', allowed, remaining, retry, reset, 0)

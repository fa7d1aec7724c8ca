-- Sliding window (algorithm/slidingwindow.go). Parameters: n, limit, sub-windows N,
-- sub-window length ms; P7 the settle's debt bound (see prelude.lua). The state's struct format
-- is '<Bdddd' and N+1 'd': a constant of the script for one sub-window (the default), built
-- per call for more. State: byte 'w', sub ms, cur, N, key expiry ms, then N+1 counters: sub-window w's
-- at index w mod (N+1). The state lives in one table t (t[6 + w mod (N+1)] is sub-window w's
-- counter) and the common path inlines what the Go code does in helpers.
-- Its helper muldiv (muldiv.lua) is defined once per script; below "--@decide", the body (see
-- prelude.lua).

--@decide
local n, limit, windows, sub_ms, debt = P1, P2, P3, P4, P7
local fmt = '<Bdddddd' -- one sub-window: no string built
if windows ~= 1 then fmt = '<Bdddd' .. string.rep('d', windows + 1) end
local size = windows + 1
local sub = sub_ms * MS

local nms, nsub = now_ms, now_sub -- now, moved to the newest sub-window's start if behind it
local t
local exp = 0
local dirty = false
--@read()
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
  --@muldiv(q, r, old, sub - f, sub)
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

local allowed, retry, nxt = 0, 0, 0
local need = -1 -- >= 0: when the estimate leaves room for limit - need units is wanted
if n > limit then
  retry = -1
elseif used + n <= limit then
  if n > 0 then
    local i = 6 + w % size -- w = cur here: among the recent sub-windows
    t[i] = t[i] + n
    used, dirty = used + n, true
    if used >= limit then need, recent = limit - 1, recent + n end -- nothing left: when one unit frees
  end
  allowed = 1
else
  need = limit - n -- retry-after: when there is room for n
end
if need >= 0 then
  -- the first instant the estimate leaves room (at most need used)
  local rc, od = recent, old
  local at = ((cur + windows + 1) * sub_ms - nms) * MS - nsub
  for k = 0, windows + 1 do
    local wk = cur + k
    if rc <= need then
      local fk = 0
      if od > 0 and need - rc < od then
        fk = sub - muldiv(need - rc, sub, od)
      end
      if k == 0 and f > fk then fk = f end
      if fk < sub then
        at = (wk * sub_ms - nms) * MS + fk - nsub
        break
      end
    end
    local leaving = 0
    local j = wk - windows + 1
    if j <= cur then leaving = t[6 + j % size] end
    rc, od = rc - leaving, leaving
  end
  if allowed == 1 then nxt = at else retry = at end
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
  --@persist(reset, t[5], struct.pack(fmt, unpack(t, 1, 5 + size)))
end
local remaining = limit - used
if remaining < 0 then remaining = 0 end
if retry > MAXD then retry = MAXD end
if reset > MAXD then reset = MAXD end
if nxt > MAXD then nxt = MAXD end
return struct.pack('<ddddd', allowed, remaining, retry, reset, nxt)

-- Sliding window (algorithm/slidingwindow.go). Parameters: n, limit, sub-windows N,
-- sub-window length ms. State: byte 'w', sub ms, cur, N, key expiry ms, then N+1 counters:
-- the counter of sub-window w at index w mod (N+1).
local n, limit, windows, sub_ms = P1, P2, P3, P4
local sub = sub_ms * MS

local nms, nsub = now_ms, now_sub -- now, moved to the newest sub-window's start if behind it
local tag, s_sub_ms, cur, nw, exp = 0, 0, 0, 0, 0
local counts
local dirty = false
local v = redis.pcall('GET', key)
if v then
  if #v >= 49 then tag, s_sub_ms, cur, nw, exp = struct.unpack('<Bdddd', v) end
  if tag == 119 and #v == 33 + 8 * (nw + 1) then
    counts = {struct.unpack('<' .. string.rep('d', nw + 1), v, 34)}
    counts[nw + 2] = nil -- struct.unpack's next position
  else -- another algorithm's state (or type): a new algorithm starts from full
    redis.call('DEL', key)
    v, exp = false, 0
  end
end

-- muldiv returns floor(a*b/c) and a*b mod c, exactly (see bucket.lua).
local function muldiv(a, b, c)
  local p = a * b
  local q = floor(p / c)
  local r
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
  return q, r
end

local function fdiv(a, b) return (muldiv(a, 1, b)) end

-- advance makes w the newest sub-window, zeroing the ones in between.
local function advance(w)
  if w <= cur then return end
  local size = #counts
  for i = cur + 1, math.min(w, cur + size) do counts[i % size + 1] = 0 end
  cur, dirty = w, true
end

-- estimate returns the N newest sub-windows' sum, the oldest one's count and now's offset
-- (ns) into sub-window cur of length sms ms.
local function estimate(sms)
  local size = #counts
  local recent = 0
  for j = cur - size + 2, cur do recent = recent + counts[j % size + 1] end
  return recent, counts[(cur - size + 1) % size + 1], (nms - cur * sms) * MS + nsub
end

-- weighted is ceil(old x (sb - f) / sb): the oldest sub-window's part still inside.
local function weighted(old, f, sb)
  if old == 0 then return 0 end
  local q, r = muldiv(old, sb - f, sb)
  if r > 0 then q = q + 1 end
  return q
end

if not v or nw ~= windows or s_sub_ms ~= sub_ms then -- reshape, carrying the estimate
  local carried = 0
  if v then
    local w = fdiv(nms, s_sub_ms)
    if w < cur then w, nms, nsub = cur, cur * s_sub_ms, 0 end
    advance(w)
    local recent, old, f = estimate(s_sub_ms)
    carried = recent + weighted(old, f, s_sub_ms * MS)
    dirty = true
  end
  counts = {}
  for i = 1, windows + 1 do counts[i] = 0 end
  cur = fdiv(nms, sub_ms)
  counts[cur % (windows + 1) + 1] = carried
end
local size = windows + 1

local w = fdiv(nms, sub_ms)
if w < cur then w, nms, nsub = cur, cur * sub_ms, 0 end -- the clock went backwards
advance(w)
local recent, old, f = estimate(sub_ms)
local used = recent + weighted(old, f, sub)

local function reset_after()
  for j = cur, cur - windows, -1 do
    if counts[j % size + 1] ~= 0 then
      return ((j + windows + 1) * sub_ms - nms) * MS - nsub
    end
  end
  return 0
end

local function retry_after(need)
  local rc, od = recent, old
  for k = 0, windows + 1 do
    local wk = cur + k
    if rc <= need then
      local fk = 0
      if od > 0 and need - rc < od then
        fk = sub - muldiv(need - rc, sub, od)
      end
      if k == 0 and f > fk then fk = f end
      if fk < sub then return (wk * sub_ms - nms) * MS + fk - nsub end
    end
    local leaving = 0
    local j = wk - windows + 1
    if j <= cur then leaving = counts[j % size + 1] end
    rc, od = rc - leaving, leaving
  end
  return ((cur + windows + 1) * sub_ms - nms) * MS - nsub
end

local function persist()
  local reset = reset_after()
  if (dirty and v) or reset > 0 and (dirty or not v) then
    local need = GRACE
    if reset > 0 then need = math.ceil(reset / MS) end
    if need < ttl_floor then need = ttl_floor end
    local life = now_ms + need
    local fmt = '<Bdddd' .. string.rep('d', size)
    if exp >= life and exp <= life + SLACK then
      redis.call('SET', key, struct.pack(fmt, 119, sub_ms, cur, windows, exp, unpack(counts)), 'KEEPTTL')
    else
      local px = need + SLACK
      if px > MAX_TTL then px = MAX_TTL end
      redis.call('SET', key, struct.pack(fmt, 119, sub_ms, cur, windows, now_ms + px, unpack(counts)), 'PX', px)
    end
  end
  return reset
end

-- reply packs the answer (see prelude.lua).
local function reply(allowed, remaining, retry, reset)
  if retry > MAXD then retry = MAXD end
  if reset > MAXD then reset = MAXD end
  return struct.pack('<ddddd', allowed, remaining, retry, reset, 0)
end

if n > limit then
  return reply(0, math.max(0, limit - used), -1, persist())
end
local allowed, retry = 0, 0
if n < 0 then
  local m = -n
  for j = cur, cur - size + 1, -1 do -- newest sub-windows first
    if m <= 0 then break end
    local i = j % size + 1
    local take = math.min(counts[i], m)
    counts[i], m = counts[i] - take, m - take
  end
  allowed, dirty = 1, true
  recent, old, f = estimate(sub_ms)
  used = recent + weighted(old, f, sub)
elseif used + n <= limit then
  if n > 0 then
    local i = w % size + 1
    counts[i] = counts[i] + n
    used, dirty = used + n, true
  end
  allowed = 1
else
  retry = retry_after(limit - n)
end
return reply(allowed, math.max(0, limit - used), retry, persist())

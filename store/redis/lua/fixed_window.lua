-- Fixed window (algorithm/fixedwindow.go). Parameters: n, limit, period ms; P7 the settle's
-- debt bound (see prelude.lua). State: byte 'f', window end ms, count, key expiry ms.
local n, limit, pms, debt = P1, P2, P3, P7

local tag, end_ms, count, exp = 0, 0, 0, 0
local dirty = false
--@read()
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
  --@persist_ms(need, exp, struct.pack('<Bddd', 102, end_ms, count, exp))
end
local reset = 0
if count > 0 then reset = (end_ms - now_ms) * MS - now_sub end
local remaining = limit - count
if remaining < 0 then remaining = 0 end
local nxt = 0 -- a take that leaves nothing: the next unit frees with the window
if allowed == 1 and n > 0 and remaining == 0 then nxt = reset end
return struct.pack('<ddddd', allowed, remaining, retry, reset, nxt)

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

--@decide
local n, max_delay, limit, pms, capacity, queue, debt = P1, P2, P3, P4, P5, P6, P7
local period = pms * MS
local want = 116 -- 't'
if queue == 1 then want = 108 end -- 'l'
queue = queue == 1

local tag, last_ms, last_sub, U, F, exp = 0, now_ms, now_sub, 0, 0, 0
local dirty = false
--@read()
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
          --@muldiv(q, r, e, limit, pms)
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
  --@persist(reset, exp, struct.pack('<Bddddd', want, last_ms, last_sub, U, F, exp))
end
local remaining = capacity - U
if F > 0 then remaining = remaining - 1 end
if remaining < 0 then remaining = 0 end
return struct.pack('<ddddd', allowed, remaining, retry, reset, delay)

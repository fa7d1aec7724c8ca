-- GCRA (algorithm/gcra.go). Parameters: n, max delay ns, interval T ns, window ns
-- (capacity x T), capacity; P7 the settle's debt bound (see prelude.lua). State: byte 'g', TAT
-- (ms, sub-ms ns), key expiry ms.
local n, max_delay, t, window, capacity, debt = P1, P2, P3, P4, P5, P7

local ahead = 0 -- max(TAT, now) - now, ns
local stale = false -- TAT is before now: an admitted request moves it to now
local tag, ms, sub, exp = 0, 0, 0, 0
--@read()
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
  --@persist(ahead, exp, struct.pack('<Bddd', 103, now_ms + c, r, exp))
end

-- remaining = floor(max(0, window - ahead) / T), exact (muldiv.lua, inline)
local remaining = 0
local room = window - ahead
if room > 0 then
  local rem
  --@muldiv(remaining, rem, room, 1, t)
end
if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed, delay = 1, 0
  if debt == 0 then retry = 0 end
end
if retry > MAXD then retry = MAXD end
if ahead > MAXD then ahead = MAXD end
if delay > MAXD then delay = MAXD end
return struct.pack('<ddddd', allowed, remaining, retry, ahead, delay)

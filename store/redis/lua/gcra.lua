-- GCRA (algorithm/gcra.go). ARGV: 4 n, 5 max delay ns, 6 interval T ns, 7 window ns
-- (capacity x T), 8 capacity. State 'G' + (TAT ms, TAT sub-ms ns).
local n = tonumber(ARGV[4])
local max_delay = tonumber(ARGV[5])
local t = tonumber(ARGV[6])
local window = tonumber(ARGV[7])
local capacity = tonumber(ARGV[8])

local ahead = 0 -- max(TAT, now) - now, ns
local stale = false -- TAT is before now: an admitted request moves it to now
local v = load(71)
if v then
  local ms, sub = struct.unpack('dd', v, 2)
  ahead = (ms - now_ms) * MS + (sub - now_sub)
  if ahead < 0 then ahead, stale = 0, true end
end

local function remaining()
  local room = window - ahead
  if room <= 0 then return 0 end
  return (muldiv(room, 1, t))
end

if n > capacity then
  return reply(0, remaining(), -1, ahead, 0)
end
local allowed, retry, delay = 0, 0, 0
if n < 0 then
  ahead = ahead + n * t
  if ahead < 0 then ahead = 0 end
  allowed = 1
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
if allowed == 1 and (n ~= 0 or stale) and (ahead > 0 or v) then
  local s = now_sub + ahead
  local c = floor(s / MS)
  local r = s - c * MS
  if r < 0 then c = c - 1; r = r + MS elseif r >= MS then c = c + 1; r = r - MS end
  save('G' .. struct.pack('dd', now_ms + c, r), ahead)
end
return reply(allowed, remaining(), retry, ahead, delay)

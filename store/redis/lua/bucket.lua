-- Token bucket and leaky bucket (algorithm/bucket.go: level.decide). ARGV: 4 n, 5 max delay
-- ns, 6 limit, 7 period ms, 8 capacity, 9 '1' for the leaky bucket's queue discipline.
-- State 'T' or 'L' + (last ms, last sub-ms ns, level units U, level sub-units F): the Go
-- fixed-point level is U x 1e9 + F, kept in two parts so it stays exact.
local n = tonumber(ARGV[4])
local max_delay = tonumber(ARGV[5])
local limit = tonumber(ARGV[6])
local pms = tonumber(ARGV[7])
local capacity = tonumber(ARGV[8])
local queue = ARGV[9] == '1'
local period = pms * MS
local tag = 84 -- 'T'
if queue then tag = 76 end -- 'L'

local U, F = 0, 0
local last_ms, last_sub = now_ms, now_sub
local dirty = false
local v = load(tag)
if v then
  last_ms, last_sub, U, F = struct.unpack('dddd', v, 2)
  -- drain: level -= floor(elapsed x limit x 1e9 / period), never below 0; Last only moves on.
  local e = (now_ms - last_ms) * MS + (now_sub - last_sub)
  if e > 0 then
    if U > 0 or F > 0 then
      if e * limit / period > U + 2 then
        U, F = 0, 0
      else
        local q, r = muldiv(e, limit, pms) -- drained = q x 1000 + floor(r x 1000 / pms)
        local d2 = floor(r * 1000 / pms)
        local du = floor(q / 1000000)
        local df = (q - du * 1000000) * 1000 + d2
        U, F = U - du, F - df
        if F < 0 then U, F = U - 1, F + SCALE end
        if U < 0 then U, F = 0, 0 end
      end
    end
    last_ms, last_sub, dirty = now_ms, now_sub, true
  end
end

-- time_for: ns to drain xu x 1e9 + xf sub-units, rounded up (timeFor).
local function time_for(xu, xf)
  if xu < 0 or (xu == 0 and xf <= 0) then return 0 end
  local qa, ra = muldiv(xu, period, limit)
  local m = limit * 1000
  local qb, rb = muldiv(xf, pms, m)
  local s = ra * 1000 + rb
  local x = qa + qb
  if s > m then x = x + 2 elseif s > 0 then x = x + 1 end
  return math.min(x, MAXD) -- saturating, as mulDivCeil
end

local function remaining()
  local r = capacity - U
  if F > 0 then r = r - 1 end
  if r < 0 then return 0 end
  return r
end

local function persist()
  if dirty then
    save('' .. string.char(tag) .. struct.pack('dddd', last_ms, last_sub, U, F), time_for(U, F))
  end
end

if n > capacity then
  persist()
  return reply(0, remaining(), -1, time_for(U, F), 0)
end
local allowed, retry, delay = 0, 0, 0
if n < 0 then
  U = U + n
  if U < 0 then U, F = 0, 0 end
  allowed = 1
else
  local ou = U + n - capacity -- over = ou x 1e9 + F: units that do not fit now
  local fits = ou < 0 or (ou == 0 and F == 0)
  if fits and (max_delay == 0 or not queue) then
    allowed = 1
  elseif max_delay > 0 and queue and fits and time_for(U, F) <= max_delay then
    allowed, delay = 1, time_for(U, F)
  elseif max_delay > 0 and not queue and time_for(ou, F) <= max_delay then
    allowed, delay = 1, time_for(ou, F)
  else
    local wait = time_for(ou, F)
    if max_delay > 0 then
      if queue then
        wait = math.max(wait, time_for(U, F) - max_delay)
      else
        wait = wait - max_delay
      end
    end
    if wait < 1 then wait = 1 end
    retry = wait
  end
  if allowed == 1 then U = U + n end
end
if allowed == 1 and n ~= 0 then
  if not v and U == 0 and F == 0 then
    dirty = false -- nothing to keep for a key that was full and still is
  else
    dirty = true
  end
end
persist()
return reply(allowed, remaining(), retry, time_for(U, F), delay)

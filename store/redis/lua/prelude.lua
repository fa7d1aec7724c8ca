-- Prelude of every Sluice script (the Go package prepends it to each algorithm's file).
--
-- Conventions: KEYS[1] is the only key (one hash tag per decision). ARGV[1], ARGV[2] are the
-- client clock as Unix milliseconds and the nanoseconds within that millisecond, or both
-- empty to read the Redis server clock (TIME). ARGV[3] is the shortest TTL in ms (0 with the
-- server clock; with a client clock, which need not run at the server's rate, more). Times are (ms, sub-ms ns) pairs so every value
-- stays an exact integer in Lua's doubles; durations are returned in nanoseconds. Each script
-- mirrors one state machine of Sluice's Go package algorithm, step for step.
local floor = math.floor
local MS = 1000000        -- ns per ms
local SCALE = 1000000000  -- fixed-point sub-units per unit (algorithm.Scale)
local EXACT = 4503599627370496 -- 2^52: products below it are exact in a double
local GRACE = 1000        -- ms a drained state is kept, so a clock stepping back sees it
local MAXD = 9223372036854774784 -- largest double below 2^63: durations saturate there
local MAX_TTL = 63244800000 -- ms, twice sluice.MaxPeriod: no state is kept longer

local key = KEYS[1]
local ttl_floor = tonumber(ARGV[3])
local now_ms, now_sub
if ARGV[1] == '' then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
else
  now_ms = tonumber(ARGV[1])
  now_sub = tonumber(ARGV[2])
end

-- split and prod_err compute a*b - fl(a*b) exactly (Dekker's two-product).
local function split(a)
  local t = 134217729 * a
  local hi = t - (t - a)
  return hi, a - hi
end

local function prod_err(a, b, p)
  local ah, al = split(a)
  local bh, bl = split(b)
  return ((ah * bh - p) + ah * bl + al * bh) + al * bl
end

-- muldiv returns floor(a*b/c) and a*b mod c, exactly, for integers a, b >= 0 and c > 0
-- whose quotient is below 2^53 (the mulDiv of package algorithm).
local function muldiv(a, b, c)
  local p = a * b
  local q = floor(p / c)
  local r
  if p < EXACT then
    r = p - q * c
  else
    local qc = q * c
    r = (p - qc) + (prod_err(a, b, p) - prod_err(q, c, qc))
  end
  while r < 0 do q = q - 1; r = r + c end
  while r >= c do q = q + 1; r = r - c end
  return q, r
end

-- load returns the key's packed state if it belongs to this algorithm (tag byte), else nil;
-- another algorithm's state (or another type) is deleted: a new algorithm starts from full.
local function load(tag)
  local v = redis.pcall('GET', key)
  if type(v) == 'string' and string.byte(v) == tag then
    return v
  end
  if v then
    redis.call('DEL', key)
  end
  return nil
end

-- px is the TTL in ms of a state that is back to full in ns nanoseconds.
local function px(ns)
  return math.min(MAX_TTL, math.max(1, ttl_floor, math.ceil(ns / MS)))
end

-- reply is a script's answer: allowed (0/1), remaining, and retry-after, reset-after and
-- delay in ns, saturating like package algorithm's arithmetic (retry -1 is never).
local function reply(allowed, remaining, retry, reset, delay)
  return {allowed, remaining, math.min(retry, MAXD), math.min(reset, MAXD), math.min(delay, MAXD)}
end

-- save writes a packed state that is back to full in reset ns; a state already full is kept
-- for GRACE ms only.
local function save(v, reset)
  if reset > 0 then
    redis.call('SET', key, v, 'PX', px(reset))
  else
    redis.call('SET', key, v, 'PX', math.max(GRACE, ttl_floor))
  end
end

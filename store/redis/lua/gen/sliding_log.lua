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


local key = KEYS[1]
local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[1])
if ttl_floor == 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  now_ms = tonumber(t[1]) * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
end
local X1 = ARGV[2]

-- Sliding log (algorithm/slidinglog.go). Parameters: n, limit, period ms; P7 the settle's
-- debt bound (see prelude.lua; for the log it is the limit). State: a sorted set of admitted
-- units, score = admission time in Unix microseconds, member "<µs>" for the first unit
-- admitted at that instant and "<µs>:<digits of k><k>" for the k-th more, so members sort by
-- admission order within one instant. It holds at most 2 x limit members, the newest (more
-- only while a settle keeps the key in debt; see algorithm.SlidingLog).
local n, limit, p, debt = P1, P2, P3, P7
p = p * 1000 -- period, µs
local now = now_ms * 1000 + floor(now_sub / 1000)
local asked = now -- now, before a clock gone backwards stands still at the newest unit
local bound = 2 * limit

-- px is the TTL in ms of a log that is empty in ns nanoseconds.
local function px(ns)
  return math.min(MAX_TTL, math.max(1, ttl_floor, math.ceil(ns / MS)))
end

-- reply packs the answer (see prelude.lua).
local function reply(allowed, remaining, retry, reset)
  if remaining < 0 then remaining = 0 end
  return struct.pack('<ddddd', allowed, remaining, math.min(retry, MAXD), math.min(reset, MAXD), 0)
end

local c = 0
local newest, newest_member
local top = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
if top.err then
  redis.call('DEL', key) -- another algorithm's state: start from full
elseif #top > 0 then
  newest_member, newest = top[1], tonumber(top[2])
  if now < newest then now = newest end -- the clock went backwards: time stands still
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now - p))
  c = redis.call('ZCARD', key)
  if c > bound then -- the limit was lowered: keep the newest
    redis.call('ZREMRANGEBYRANK', key, 0, c - bound - 1)
    c = bound
  end
end

local function reset()
  if c == 0 then return 0 end
  return (newest + p - now) * 1000
end

-- record adds u units at now.
local function record(u)
  local k = 0
  if c > 0 and newest == now then -- continue the newest instant's sequence
    local pos = string.find(newest_member, ':', 1, true)
    if pos then k = tonumber(string.sub(newest_member, pos + 2)) + 1 else k = 1 end
  end
  local base = string.format('%.0f', now)
  local args = {}
  for i = k, k + u - 1 do
    local m = base
    if i > 0 then
      local ks = tostring(i)
      m = base .. ':' .. #ks .. ks
    end
    args[#args + 1] = base
    args[#args + 1] = m
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
  c, newest = c + u, now
  redis.call('PEXPIRE', key, px(p * 1000))
end

-- a refund, or a settle (a charge past the limit: the debt is the members beyond it, and the
-- oldest beyond 2 x limit are dropped), applies n; then the decision is a peek's
local applied = n < 0 or debt > 0
if applied then
  if n > 0 then
    local u = math.min(n, bound)
    if c + u > bound then
      redis.call('ZREMRANGEBYRANK', key, 0, c + u - bound - 1)
      c = bound - u
    end
    record(u)
  elseif n < 0 then
    local m = math.min(-n, c)
    if m > 0 then
      redis.call('ZREMRANGEBYRANK', key, -m, -1) -- the newest units go back
      c = c - m
      if c > 0 then
        newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
        redis.call('PEXPIRE', key, px((newest + p - now) * 1000))
      end
    end
    -- a settle reports as a peek after the refund, which stands still at the newest unit left
    if debt > 0 then
      now = asked
      if c > 0 and now < newest then now = newest end
    end
  end
  n = 0
end

if n > limit then
  return reply(0, limit - c, -1, reset())
end
local allowed, retry = 0, 0
if c + n <= limit then
  if n > 0 then record(n) end
  allowed = 1
else
  -- the request fits once the oldest c+n-limit units have aged out
  local i = c + n - limit - 1
  local s = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  retry = (tonumber(s[2]) + p - now) * 1000
end
if applied then -- allowed; a settle's retry-after is when its debt is paid
  allowed = 1
  if debt == 0 then retry = 0 end
end
return reply(allowed, limit - c, retry, reset())

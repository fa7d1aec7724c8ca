-- Sliding log (algorithm/slidinglog.go). Parameters: n, limit, period ms.
-- State: a sorted set of admitted units, score = admission time in Unix microseconds, member
-- "<µs>" for the first unit admitted at that instant and "<µs>:<digits of k><k>" for the k-th
-- more, so members sort by admission order within one instant.
local n, limit, p = P1, P2, P3
p = p * 1000 -- period, µs
local now = now_ms * 1000 + floor(now_sub / 1000)

-- px is the TTL in ms of a log that is empty in ns nanoseconds.
local function px(ns)
  return math.min(MAX_TTL, math.max(1, ttl_floor, math.ceil(ns / MS)))
end

-- reply packs the answer (see prelude.lua).
local function reply(allowed, remaining, retry, reset)
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
  if c > limit then -- the limit was lowered: keep the newest
    redis.call('ZREMRANGEBYRANK', key, 0, c - limit - 1)
    c = limit
  end
end

local function reset()
  if c == 0 then return 0 end
  return (newest + p - now) * 1000
end

if n > limit then
  return reply(0, limit - c, -1, reset())
end
local allowed, retry = 0, 0
if n < 0 then
  local m = math.min(-n, c)
  if m > 0 then
    redis.call('ZREMRANGEBYRANK', key, -m, -1) -- the newest units go back
    c = c - m
    if c > 0 then
      newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
      redis.call('PEXPIRE', key, px((newest + p - now) * 1000))
    end
  end
  allowed = 1
elseif c + n <= limit then
  if n > 0 then
    local k = 0
    if c > 0 and newest == now then -- continue the newest instant's sequence
      local pos = string.find(newest_member, ':', 1, true)
      if pos then k = tonumber(string.sub(newest_member, pos + 2)) + 1 else k = 1 end
    end
    local base = string.format('%.0f', now)
    local args = {}
    for i = k, k + n - 1 do
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
    c, newest = c + n, now
    redis.call('PEXPIRE', key, px(p * 1000))
  end
  allowed = 1
else
  -- the request fits once the oldest c+n-limit units have aged out
  local i = c + n - limit - 1
  local s = redis.call('ZRANGE', key, i, i, 'WITHSCORES')
  retry = (tonumber(s[2]) + p - now) * 1000
end
return reply(allowed, limit - c, retry, reset())

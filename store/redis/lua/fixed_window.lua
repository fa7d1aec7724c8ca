-- Fixed window (algorithm/fixedwindow.go). ARGV: 4 n, 5 limit, 6 period ms.
-- State 'F' + (window end ms, count).
local n = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local pms = tonumber(ARGV[6])

local end_ms, count = 0, 0
local dirty = false
local v = load(70)
if v then
  end_ms, count = struct.unpack('dd', v, 2)
end
if not v or now_ms >= end_ms then -- a new window; a clock gone backwards stays in this one
  end_ms = muldiv(now_ms, 1, pms) * pms + pms
  count = 0
  dirty = v ~= nil
end

local function reset()
  if count == 0 then return 0 end
  return (end_ms - now_ms) * MS - now_sub
end

local function persist()
  if dirty then
    -- the window's end bounds the state's life (it matters until then even when empty)
    redis.call('SET', key, 'F' .. struct.pack('dd', end_ms, count), 'PX', px((end_ms - now_ms) * MS))
  end
end

if n > limit then
  persist()
  return reply(0, math.max(0, limit - count), -1, reset(), 0)
end
local allowed, retry = 0, 0
if n < 0 then
  count = math.max(0, count + n)
  allowed = 1
elseif count + n <= limit then
  count = count + n
  allowed = 1
else
  retry = (end_ms - now_ms) * MS - now_sub
end
if allowed == 1 and n ~= 0 and (v or count > 0) then
  dirty = true
end
persist()
return reply(allowed, math.max(0, limit - count), retry, reset(), 0)

-- Budget variant of a script (go generate assembles it like holdback.lua: the prelude's
-- constants, the algorithm's helpers, this file with the algorithm's body in place of the
-- "--@body" line, and the prelude's arguments of one decision in place of "--@single"). It
-- mirrors algorithm.Ledger's step (sluice.Request.Budget): one reserve, extension or commit of
-- a reservation, decided with the key's state in one call.
--
-- KEYS[1] is the state, KEYS[2] a hash of the open reservations' records (id -> five packed
-- doubles: held, counted, until ms (-1: never), expiry ms, free 0/1) and KEYS[3] a sorted set
-- of their ids scored by expiry (ms); all three share the key's hash tag, and the two expire
-- with the last reservation (ledger_ttl). ARGV[1] are the single script's packed parameters
-- (P1, the cost, is replaced at each call of the body; P7 is the debt bound of a budget step,
-- algorithm.BudgetDebt), ARGV[2] a slot no script reads, ARGV[3] the step's parameters as nine
-- packed doubles (one struct.unpack, as ARGV[1]): the step (1 reserve, 2 extend, 3 commit),
-- its units (held or actual), the TTL (ms), 1 for strict, 1 for free on expiry, the length
-- (ms; 0: never) and count of the windows a charge stays in the state (algorithm.ChargeLife:
-- until = (floor(now / length) + count) x length), the capacity and the most reservations a
-- key holds open; ARGV[4] the reservation id (16 bytes).
--
-- The body is called as algorithm.Ledger calls the state: a take (P7 = 0), a settle (P7 = the
-- debt bound), a refund (a negative cost). The reply is the step's decision (five doubles,
-- the delay's slot 0; an admitted reserve's or extension's remaining is what was left when it
-- came, as algorithm's admit says), or 'N' for a reservation not open (extend, commit) and 'O' for a
-- reserve of an id already open: errors that moved nothing.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, got)
--@body
end

--@single
local holds, expiries = KEYS[2], KEYS[3]
local op, n, ttl_ms, strict, free, life_len, life_count, capacity, max_open =
  struct.unpack('<ddddddddd', ARGV[3])
local id = ARGV[4]
local MAX_LIMIT = 1000000000 -- sluice.MaxLimit
local MAX_HELD = 1125899906842624 -- 2^50, algorithm's maxHeld
local debt = P7

-- the reservations expired by now are dropped, the free ones giving back what the state still
-- counts of them, in one refund
local expired = redis.call('ZRANGEBYSCORE', expiries, '-inf', now_ms)
if #expired > 0 then
  local back = 0
  for i = 1, #expired, 1000 do -- unpack takes a bounded number of values
    local j = i + 999
    if j > #expired then j = #expired end
    local recs = redis.call('HMGET', holds, unpack(expired, i, j))
    for k = 1, #recs do
      if recs[k] then
        local _, counted, until_ms, _, fr = struct.unpack('<ddddd', recs[k])
        if fr == 1 and (until_ms < 0 or now_ms < until_ms) then back = back + counted end
      end
    end
    redis.call('HDEL', holds, unpack(expired, i, j))
  end
  redis.call('ZREMRANGEBYSCORE', expiries, '-inf', now_ms)
  if back > MAX_LIMIT then back = MAX_LIMIT end
  if back > 0 then decide(key, now_ms, now_sub, ttl_floor, -back, P2, P3, P4, P5, P6, 0, got) end
end

local rec = redis.call('HGET', holds, id)
local allowed, remaining, retry, reset
if op == 3 then -- commit: a settle of actual minus held (the over-estimate given back while counted)
  if not rec then return 'N' end
  local held, counted, until_ms = struct.unpack('<ddddd', rec)
  local x, delta = 0, n - held
  if delta > 0 then
    x = delta
    if x > MAX_LIMIT then x = MAX_LIMIT end
  elseif delta < 0 and (until_ms < 0 or now_ms < until_ms) then
    x = -delta
    if x > counted then x = counted end
    if x > MAX_LIMIT then x = MAX_LIMIT end
    x = -x
  end
  redis.call('HDEL', holds, id)
  redis.call('ZREM', expiries, id)
  allowed, remaining, retry, reset = struct.unpack('<ddddd',
    decide(key, now_ms, now_sub, ttl_floor, x, P2, P3, P4, P5, P6, debt, got))
else
  local held, counted, until_ms, fr = 0, 0, 0, 0
  if op == 1 then
    if rec then return 'O' end
    if free == 1 then fr = 1 end
    if redis.call('ZCARD', expiries) >= max_open then -- full: refused until the soonest expires
      local soonest = tonumber(redis.call('ZRANGE', expiries, 0, 0, 'WITHSCORES')[2])
      allowed, remaining, retry, reset = struct.unpack('<ddddd',
        decide(key, now_ms, now_sub, ttl_floor, 0, P2, P3, P4, P5, P6, 0, got))
      retry = (soonest - now_ms) * MS - now_sub
      if retry < 1 then retry = 1 end
      return struct.pack('<ddddd', 0, remaining, retry, reset, 0)
    end
  else
    if not rec then return 'N' end
    local exp_ms
    held, counted, until_ms, exp_ms, fr = struct.unpack('<ddddd', rec)
  end
  if op == 2 and n == 0 then -- a renewal: a peek, allowed
    allowed, remaining, retry, reset = struct.unpack('<ddddd',
      decide(key, now_ms, now_sub, ttl_floor, 0, P2, P3, P4, P5, P6, 0, got))
    allowed = 1
  elseif strict == 1 or n > capacity then -- a take of n
    allowed, remaining, retry, reset = struct.unpack('<ddddd',
      decide(key, now_ms, now_sub, ttl_floor, n, P2, P3, P4, P5, P6, 0, got))
    if allowed == 1 then remaining = remaining + n end -- what was left when it came
  else -- bounded: while one unit fits, then the rest whatever the limit
    allowed, remaining, retry, reset = struct.unpack('<ddddd',
      decide(key, now_ms, now_sub, ttl_floor, 1, P2, P3, P4, P5, P6, 0, got))
    if allowed == 1 then
      local left = remaining + 1 -- what was left when it came
      allowed, remaining, retry, reset = struct.unpack('<ddddd',
        decide(key, now_ms, now_sub, ttl_floor, n - 1, P2, P3, P4, P5, P6, debt, got))
      remaining, retry = left, 0
    end
  end
  if allowed == 1 then
    if until_ms >= 0 and now_ms >= until_ms then counted = 0 end
    held, counted = held + n, counted + n
    if held > MAX_HELD then held = MAX_HELD end
    if counted > MAX_HELD then counted = MAX_HELD end
    until_ms = -1
    if life_len > 0 then
      local w = floor(now_ms / life_len) -- exact up to the off-by-one fixed here
      if w * life_len > now_ms then w = w - 1 elseif (w + 1) * life_len <= now_ms then w = w + 1 end
      until_ms = (w + life_count) * life_len
    end
    local exp_ms = now_ms + ttl_ms
    redis.call('HSET', holds, id, struct.pack('<ddddd', held, counted, until_ms, exp_ms, fr))
    redis.call('ZADD', expiries, exp_ms, id)
  end
end
if redis.call('ZCARD', expiries) > 0 then
  --@ledger_ttl(expiries, holds)
else
  redis.call('DEL', holds, expiries)
end
return struct.pack('<ddddd', allowed, remaining, retry, reset, 0)

-- Prelude of every Sluice script. `go generate` assembles each script into store/redis/lua/gen
-- (package store/redis/internal/luagen): this file's constants, then the algorithm file's
-- helpers (the part above its "--@decide" line, if any: functions of their arguments only,
-- defined once per script), then this file's part below "--@single" (the arguments of one
-- decision) and the algorithm's body, which decides for `key` and returns the reply. The
-- batched variant (multi.lua) puts the body in a function instead, called once per key. Code
-- that several scripts share is written once, as a snippet that the generator splices inline
-- where a line calls it, "--@name(arguments)": persist.lua writes a state with its TTL,
-- muldiv.lua divides an exact product.
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
-- the body, is an extra argument: the lease scripts' lease id; no algorithm reads one (the
-- sliding window's struct format, passed there before, is a constant of its script), so a
-- store may send any value or none there, and the criticality variant keeps the slot
-- (holdback.lua). Times are
-- (ms, sub-ms ns) pairs so every value stays an exact integer in Lua's doubles; durations are
-- nanoseconds. The reply is one string, five little-endian doubles: allowed (0/1), remaining,
-- and retry-after, reset-after and delay in ns, saturating like package algorithm's
-- arithmetic (retry -1 is never). A window algorithm, which never delays, answers in the
-- delay's place when the next unit frees after an allowed take that leaves nothing (0
-- otherwise; sluice.Decision.NextAfter).
--
-- Cost: the bodies make no closure (the sliding log's excepted) and the GCRA and fixed window
-- ones no table, call Redis twice (GET, then SET only when the state changed; in a batched
-- call one MGET reads every key) and skip TIME when the client passes the time. States carry
-- the instant their key expires (script clock, ms): while it covers what the state needs, and
-- by at most SLACK more, the state is rewritten with KEEPTTL, which costs Redis far less than
-- PX; otherwise PX sets a TTL of what the state needs plus SLACK (persist.lua). So no key
-- lives more than SLACK ms longer than its state
-- matters, and none lives for ever.
--
-- The lease scripts (lease_*.lua, sluice.Leaser) share this clock and ARGV[1] layout, with
-- their own parameters and replies; lease_acquire.lua mirrors algorithm.DecideLease.
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

--@single
local key = KEYS[1]
local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', ARGV[1])
if ttl_floor == 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0 -- one conversion (tonumber converts twice)
  now_ms = t[1] * 1000 + floor(us / 1000)
  now_sub = (us % 1000) * 1000
end
local X1 = ARGV[2]
local got -- nil: the body reads the key itself (persist.lua, read)

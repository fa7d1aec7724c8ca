-- Batched variant of a script (go generate assembles it: the prelude's constants, the
-- algorithm's helpers, this file with the algorithm's body in place of the "--@body" line).
-- KEYS are K keys of one Cluster slot; ARGV[i] is key i's packed parameters (see prelude.lua);
-- ARGV[K + i], if given, is not read (no algorithm has an extra argument). The server clock is
-- read once, when the first key asks for it, and the keys' states with one MGET, which costs
-- Redis far less than a GET per key; a key given twice reads its state again with GET
-- (persist.lua, read) after its first decision. The body is one function, defined once, called
-- for each key in order, exactly as the single script would run it alone at that instant, so
-- a key given twice sees its first decision. The reply is the K replies of 40 bytes, in order,
-- as one string. A Redis error stops the script: the keys before it have been decided.
local function decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, got)
--@body
end

local k = #KEYS
local out = {}
local pre = redis.call('MGET', unpack(KEYS))
local seen = {} -- the keys decided so far
local t_ms, t_sub
-- Calls of one rule carry the same parameters: Lua interns strings, so an ARGV equal to the
-- previous key's is the same string, compared in O(1), and its unpacked values are reused.
local prev
local now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7
for i = 1, k do
  local a = ARGV[i]
  if a ~= prev then
    prev = a
    now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7 = struct.unpack('<dddddddddd', a)
    if ttl_floor == 0 then
      if not t_ms then
        local t = redis.call('TIME')
        local us = t[2] + 0 -- one conversion (tonumber converts twice)
        t_ms = t[1] * 1000 + floor(us / 1000)
        t_sub = (us % 1000) * 1000
      end
      now_ms, now_sub = t_ms, t_sub
    end
  end
  local key = KEYS[i]
  local got = pre[i]
  if seen[key] then got = nil else seen[key] = true end
  out[i] = decide(key, now_ms, now_sub, ttl_floor, P1, P2, P3, P4, P5, P6, P7, got)
end
return table.concat(out)

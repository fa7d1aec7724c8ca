-- Snippets that read and write a decision's state, spliced by the generator (see prelude.lua)
-- into the scripts' text where a line holds "--@read()", "--@persist(...)" or
-- "--@persist_ms(...)": the code runs inline, with no function defined per call. A snippet's
-- parameters stand for the arguments of its line; it also uses the script's own key, now_ms,
-- ttl_floor and got (see prelude.lua).
--
-- read() declares v, the key's value: got, when the batched script read it already with one
-- MGET for all its keys (multi.lua: false for a missing key, or one that holds another type),
-- else GET's (an error table for another type).
--@define read()
local v = got
if v == nil then v = redis.pcall('GET', key) end
--@end
--
-- persist(ns, exp, state) writes the state, which matters for ns more nanoseconds (0: it is
-- back to full, and kept GRACE ms so that a clock stepping back still sees it): exp is the
-- variable holding its key's recorded expiry (ms) and state its packed form, read after exp
-- is set to the key's new expiry.
--@define persist(ns, exp, state)
local need = GRACE
if ns > 0 then -- ceil(ns / MS)
  need = floor(ns / MS)
  if need * MS < ns then need = need + 1 end
end
--@persist_ms(need, exp, state)
--@end

-- persist_ms(need, exp, state) is persist for a state that matters for need more ms (a
-- variable, raised to ttl_floor): while the recorded expiry covers that, by at most SLACK ms
-- more, SET KEEPTTL keeps it; otherwise PX sets what the state needs plus SLACK, at most
-- MAX_TTL.
--@define persist_ms(need, exp, state)
if need < ttl_floor then need = ttl_floor end
local life = now_ms + need
if exp >= life and exp <= life + SLACK then
  redis.call('SET', key, state, 'KEEPTTL')
else
  local px = need + SLACK
  if px > MAX_TTL then px = MAX_TTL end
  exp = now_ms + px
  redis.call('SET', key, state, 'PX', string.format('%d', px))
end
--@end

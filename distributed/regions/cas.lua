-- Compare-and-set of one key's escrow state (package regions, Coordinator.Propose): the
-- state is written only when it is still the one the proposer read, so that every region
-- reads the same shares of an epoch and none is allocated twice.
-- KEYS[1]: the state. ARGV[1]: the state read ('' for none); ARGV[2]: the new state;
-- ARGV[3]: its time to live, ms.
local cur = redis.call('GET', KEYS[1])
if cur == false then
  cur = ''
end
if cur ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1

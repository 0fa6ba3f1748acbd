-- Compare-and-set one feature-view update on one entity hash (features/online_writer.py).
-- KEYS[1]  entity hash (Feast's Redis key)
-- ARGV[1]  version field of the view ("_v:<view>")
-- ARGV[2]  incoming version, decimal, no leading zeros (up to 2^63: beyond Lua's exact numbers,
--          so versions are compared as strings: longer is larger, equal lengths compare lexically)
-- ARGV[3..] field, value pairs to set (Feast's feature fields and "_ts:<view>")
-- Returns 1 when written, 0 when the stored version is equal or newer.
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local incoming = ARGV[2]
if stored and (#stored > #incoming or (#stored == #incoming and stored >= incoming)) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], incoming, unpack(ARGV, 3))
return 1

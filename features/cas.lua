-- Compare-and-set feature-view updates, many rows per call (features/online_writer.py).
-- A row's fields are written only when its version is greater than the stored one; the check and
-- the write are atomic (the whole script is).
-- KEYS[i]  the i-th row's entity hash (Feast's Redis key)
-- ARGV     per row, in order: N (field/value pairs that follow the version), the version field
--          ("_v:<view>"), the incoming version (decimal, no leading zeros; versions go up to 2^63,
--          beyond Lua's exact numbers, so they are compared as strings: longer is larger, equal
--          lengths compare lexically), then N field, value pairs (Feast's fields and "_ts:<view>")
-- Returns one 1 (written) or 0 (stored version equal or newer) per row.
local out = {}
local a = 1
for i = 1, #KEYS do
  local pairs_n = tonumber(ARGV[a])
  local field, incoming = ARGV[a + 1], ARGV[a + 2]
  local stored = redis.call('HGET', KEYS[i], field)
  if stored and (#stored > #incoming or (#stored == #incoming and stored >= incoming)) then
    out[i] = 0
  else
    redis.call('HSET', KEYS[i], field, incoming, unpack(ARGV, a + 3, a + 2 + 2 * pairs_n))
    out[i] = 1
  end
  a = a + 3 + 2 * pairs_n
end
return out

-- Compare-and-set feature-view updates, many entities per call (features/online_writer.py and the
-- feature job's Redis sink, pipelines/udf/.../RedisFeatureSink.java).
-- A view's fields are written only when its version is greater than the stored one; the check and
-- the write are atomic (the whole script is). The views of one entity hash (Feast keeps every view
-- of an entity in one hash) are read with one HMGET and written with one HSET.
-- KEYS[i]  the i-th entity hash (Feast's Redis key)
-- ARGV     per key, in order: R (the rows for that key), then per row: N (field/value pairs that
--          follow the version), the version field ("_v:<view>"), the incoming version (decimal, no
--          leading zeros; versions go up to 2^63, beyond Lua's exact numbers, so they are compared as
--          strings: longer is larger, equal lengths compare lexically), then N field, value pairs
--          (Feast's fields and "_ts:<view>"). A key's rows are of distinct views.
-- Returns one 1 (written) or 0 (stored version equal or newer) per row, in order.
local out = {}
local o = 0
local a = 1
for i = 1, #KEYS do
  local rows = tonumber(ARGV[a])
  a = a + 1
  local fields = {}
  local b = a
  for r = 1, rows do
    fields[r] = ARGV[b + 1]
    b = b + 3 + 2 * tonumber(ARGV[b])
  end
  local stored = redis.call('HMGET', KEYS[i], unpack(fields))
  local args = {}
  local n = 0
  for r = 1, rows do
    local pairs_n = tonumber(ARGV[a])
    local incoming = ARGV[a + 2]
    local have = stored[r]
    o = o + 1
    if have and (#have > #incoming or (#have == #incoming and have >= incoming)) then
      out[o] = 0
    else
      args[n + 1] = ARGV[a + 1]
      args[n + 2] = incoming
      n = n + 2
      for j = a + 3, a + 2 + 2 * pairs_n do
        n = n + 1
        args[n] = ARGV[j]
      end
      out[o] = 1
    end
    a = a + 3 + 2 * pairs_n
  end
  if n > 0 then
    redis.call('HSET', KEYS[i], unpack(args))
  end
end
return out

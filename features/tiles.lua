-- Tile upserts merged into window values, many rows per call (features/tiles.py generates SPECS).
-- Per row, atomically on the entity's hash (Feast's Redis key):
--   1. the tile field "_t:<view>:<start>" is replaced only when the incoming version is greater than
--      the stored one (a replay or an older delivery is a no-op: returns 0);
--   2. the anchor "_a:<view>" (newest event time of the key) moves forward, never back;
--   3. tiles older than floor(anchor, tile) - window are deleted as the anchor passes them (they can
--      never be in a window again: the anchor only grows); a row for such a tile returns 2 and
--      stores nothing;
--   4. the view's Feast fields (values, "_ts:<view>" = anchor, "_v:<view>") are rewritten from the
--      window's running totals ("_s:<view>"; competitor rates from the tiles that remain). Returns 1.
-- KEYS[i]  the i-th row's entity hash
-- ARGV     per row: view, tile start (ms), version, feature time (ms), the view's partials in
--          catalogue order ("" = null), the number of competitor rates, then competitor, rate pairs
--@SPECS@

local function varint(x)
  local t = {}
  while x >= 128 do
    t[#t + 1] = string.char(x % 128 + 128)
    x = math.floor(x / 128)
  end
  t[#t + 1] = string.char(x)
  return table.concat(t)
end

local function timestamp(ms)  -- a google.protobuf.Timestamp, as Feast stores "_ts:<view>"
  local s, n = math.floor(ms / 1000), (ms % 1000) * 1000000
  local out = ''
  if s ~= 0 then out = '\8' .. varint(s) end
  if n ~= 0 then out = out .. '\16' .. varint(n) end
  return out
end

local function double(x)  -- a feast Value with double_val; the empty message is null
  if x == nil then return '' end
  return '\41' .. struct.pack('<d', x)
end

local function decimal(x) return string.format('%.0f', x) end

local function rates_of(tiles)
  local rates = {}
  for _, tile in ipairs(tiles) do
    for c, r in pairs(tile[4]) do rates[c] = r end  -- ascending tiles: the newest rate wins
  end
  local list = {}
  for _, r in pairs(rates) do list[#list + 1] = r end
  table.sort(list)
  return list
end

local function values(spec, tot, list)
  local out = {}
  for _, f in ipairs(spec.features) do
    local s, n, q, v = tot[f.s], tot[f.n], tot[f.q], nil
    if f.op == 'sum' then
      v = s or 0
    elseif f.op == 'cmed' then
      local m = #list
      if m > 0 then
        if m % 2 == 1 then v = list[(m + 1) / 2] else v = (list[m / 2] + list[m / 2 + 1]) / 2 end
      end
    elseif f.op == 'cmin' then
      v = list[1]
    elseif n and n > 0.5 and s then  -- counts are whole numbers: exact in the running totals
      v = s / n
      if f.op == 'std' then v = math.sqrt(math.max((q or 0) / n - v * v, 0)) end
    end
    out[#out + 1] = f.f
    out[#out + 1] = double(v)
  end
  return out
end

local function add(tot, partials, sign, np)
  for i = 1, np do
    local v = partials[i]
    if v then tot[i] = tot[i] + sign * v end
  end
end

-- The window's totals are kept running ("_s:<view>": the sum of its tiles' partials): a tile update
-- adds its difference, a tile leaving the window is subtracted once. An update costs O(1) tiles, not
-- the window's 169 (measured: re-merging every tile made a row 40x a plain write; bench/tile_merge.py).
local function apply(key, spec, start, version, ftime, partials, rates)
  local tfield = spec.pre .. decimal(start)
  local held = redis.call('HGET', key, tfield)
  local old = nil
  if held then
    local hv, _, hp = cmsgpack.unpack(held)
    if hv >= version then return 0 end
    old = hp
  end
  local raw_anchor = redis.call('HGET', key, spec.a)
  local old_anchor = tonumber(raw_anchor or '-1')
  local anchor = math.max(old_anchor, ftime)
  local floor = anchor - anchor % spec.tile - spec.window
  if start < floor then return 2 end
  local tot = {}
  local raw_tot = redis.call('HGET', key, spec.sum)
  if raw_tot then tot = cmsgpack.unpack(raw_tot) else for i = 1, spec.np do tot[i] = 0 end end
  add(tot, partials, 1, spec.np)
  if old then add(tot, old, -1, spec.np) end
  redis.call('HSET', key, tfield, cmsgpack.pack(version, ftime, partials, rates))
  if raw_anchor and anchor > old_anchor then
    -- tiles from the old floor up to the new one left the window: each is subtracted once. No tile
    -- starts after the old anchor's tile, so at most window/tile + 1 steps even after a long gap.
    local old_floor = old_anchor - old_anchor % spec.tile - spec.window
    local last = math.min(floor - spec.tile, old_anchor - old_anchor % spec.tile)
    local drop = {}
    for s = old_floor, last, spec.tile do drop[#drop + 1] = spec.pre .. decimal(s) end
    if #drop > 0 then
      for _, raw in ipairs(redis.call('HMGET', key, unpack(drop))) do
        if raw then
          local _, _, dp = cmsgpack.unpack(raw)
          add(tot, dp, -1, spec.np)
        end
      end
      redis.call('HDEL', key, unpack(drop))
    end
  end
  local list = {}
  if spec.cr then
    local names = {}
    for s = floor, anchor - anchor % spec.tile, spec.tile do names[#names + 1] = spec.pre .. decimal(s) end
    local tiles = {}
    for _, raw in ipairs(redis.call('HMGET', key, unpack(names))) do
      if raw then tiles[#tiles + 1] = {cmsgpack.unpack(raw)} end
    end
    list = rates_of(tiles)
  end
  local stored_v = tonumber(redis.call('HGET', key, spec.v) or '-1')
  redis.call('HSET', key, spec.a, decimal(anchor), spec.ts, timestamp(anchor),
             spec.v, decimal(math.max(stored_v, version)), spec.sum, cmsgpack.pack(tot),
             unpack(values(spec, tot, list)))
  return 1
end

local out = {}
local a = 1
for i = 1, #KEYS do
  local spec = SPECS[ARGV[a]]
  local start, version, ftime = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local partials = {}
  for p = 1, spec.np do
    local raw = ARGV[a + 3 + p]
    if raw == '' then partials[p] = false else partials[p] = tonumber(raw) end
  end
  a = a + 4 + spec.np
  local rates = {}
  local nr = tonumber(ARGV[a])
  for r = 1, nr do rates[ARGV[a + 2 * r - 1]] = tonumber(ARGV[a + 2 * r]) end
  a = a + 1 + 2 * nr
  out[i] = apply(KEYS[i], spec, start, version, ftime, partials, rates)
end
return out

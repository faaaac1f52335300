//! Sidekiq's Lua scripts. Each handles a whole batch in one script run: Redis runs a script
//! atomically, so a crash of qdeck (or of the connection) leaves every job either before or
//! after the move, never in neither place. The moves follow Sidekiq's SortedEntry#retry and
//! SortedEntry#delete.

/// Remove chosen Sidekiq jobs (by jid) from a sorted set (dead, retry or schedule), as
/// SortedEntry#delete does. Members are job payloads: the jid is read from each.
/// KEYS: the sorted set. ARGV: jids... Returns: removed.
pub const SIDEKIQ_REMOVE_JIDS: &str = r#"
local r = redis.call
local want = {}
for i = 1, #ARGV do want[ARGV[i]] = true end
local n = 0
for _, m in ipairs(r("ZRANGE", KEYS[1], 0, -1)) do
  local ok, job = pcall(cjson.decode, m)
  if ok and type(job) == "table" and want[job.jid] then
    n = n + r("ZREM", KEYS[1], m)
    want[job.jid] = nil
  end
end
return n
"#;

/// Retry Sidekiq jobs from a sorted set (dead or retry) to each job's own queue, as
/// SortedEntry#retry does: retry_count down by one when present, enqueued_at = now (integer ms
/// where the job's own times are in ms, as Sidekiq 8 writes them, else float seconds), pushed
/// on queue:<name> and the queue registered. The payload is edited in place rather than
/// re-encoded, so every other field keeps its exact bytes (Lua's JSON encoder would round
/// floats such as created_at). Only the payload's own (top-level) keys are edited: a key of
/// the same name inside args, such as an event's `enqueued_at`, is the application's data.
/// KEYS: the sorted set, the queues set. ARGV: key prefix (namespace), now, max, jids...
/// Returns: moved, unreadable (left in place).
pub const SIDEKIQ_RETRY: &str = r#"
local r = redis.call
local ns, now, max = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- The span of the value of each top-level member of the payload text `s` named in `keys`
-- (a scalar: number, string, true/false/null), found by walking the text with strings
-- skipped and depth counted, so a same-named key inside args or a string is never taken
-- for it. The last one wins when a key repeats, as with the JSON decoder.
local function top_values(s, keys)
  local spans = {}
  local depth, i = 0, 1
  local function string_end(p)
    local q = p + 1
    while true do
      q = string.find(s, '["\\]', q)
      if not q then return nil end
      if string.sub(s, q, q) == '\\' then q = q + 2 else return q end
    end
  end
  while true do
    local p = string.find(s, '["{}%[%]]', i)
    if not p then break end
    local c = string.sub(s, p, p)
    if c == '"' then
      local q = string_end(p)
      if not q then break end
      if depth == 1 and keys[string.sub(s, p + 1, q - 1)] then
        local _, _, v = string.find(s, '^%s*:%s*()', q + 1)
        if v then
          local first = string.sub(s, v, v)
          local b = nil
          if first == '"' then
            b = string_end(v)
          elseif first ~= '{' and first ~= '[' then
            local _, e = string.find(s, '^[^,}%]%s]+', v)
            b = e
          end
          if b then spans[string.sub(s, p + 1, q - 1)] = {v, b} end
        end
      end
      i = q + 1
    else
      if c == '{' or c == '[' then depth = depth + 1 else depth = depth - 1 end
      i = p + 1
    end
  end
  return spans
end
-- Set top-level number members, given as {{key, text}, ...}: in place where the key is,
-- else added at the end of the object in the order given.
local function set_numbers(s, list)
  local keys = {}
  for _, kv in ipairs(list) do keys[kv[1]] = true end
  local spans = top_values(s, keys)
  local edits, extra = {}, ""
  for _, kv in ipairs(list) do
    local sp = spans[kv[1]]
    if sp then
      edits[#edits + 1] = {sp[1], sp[2], kv[2]}
    else
      extra = extra .. ',"' .. kv[1] .. '":' .. kv[2]
    end
  end
  -- From the end, so the spans before each edit still hold.
  table.sort(edits, function(x, y) return x[1] > y[1] end)
  for _, e in ipairs(edits) do
    s = string.sub(s, 1, e[1] - 1) .. e[3] .. string.sub(s, e[2] + 1)
  end
  if extra ~= "" then
    local close = string.find(s, "}%s*$")
    s = string.sub(s, 1, close - 1) .. extra .. string.sub(s, close)
  end
  return s
end
local members
local want = nil
if #ARGV > 3 then
  want = {}
  for i = 4, #ARGV do want[ARGV[i]] = true end
  members = r("ZRANGE", KEYS[1], 0, -1)
else
  members = r("ZRANGE", KEYS[1], 0, max - 1)
end
local moved, bad = 0, 0
for _, m in ipairs(members) do
  if moved >= max then break end
  local ok, job = pcall(cjson.decode, m)
  if not ok or type(job) ~= "table" or type(job.queue) ~= "string" then
    if not want then bad = bad + 1 end
  elseif (not want) or want[tostring(job.jid)] then
    local rc = tonumber(job.retry_count)
    -- qdeck's redrive stamp (keys Sidekiq carries along untouched): how often and when (ms).
    local stamped = (tonumber(job.qdeck_redriven) or 0) + 1
    local at = math.floor(tonumber(now) * 1000)
    local edits = {}
    if rc then edits[#edits + 1] = {"retry_count", tostring(rc - 1)} end
    -- enqueued_at in the job's own unit: Sidekiq 8 writes integer milliseconds where earlier
    -- versions wrote float seconds, and reads it back in the unit it writes.
    local stamp_of = tonumber(job.enqueued_at) or tonumber(job.created_at) or 0
    local enq = now
    if stamp_of > 1e11 then enq = string.format("%d", math.floor(tonumber(now) * 1000)) end
    edits[#edits + 1] = {"enqueued_at", enq}
    edits[#edits + 1] = {"qdeck_redriven", tostring(stamped)}
    edits[#edits + 1] = {"qdeck_redriven_at", string.format("%d", at)}
    local out = set_numbers(m, edits)
    local ok2, check = pcall(cjson.decode, out)
    if not ok2 or type(check) ~= "table" or check.jid ~= job.jid
      or (rc and tonumber(check.retry_count) ~= rc - 1)
      or tonumber(check.enqueued_at) ~= tonumber(enq)
      or tonumber(check.qdeck_redriven) ~= stamped then
      if rc then job.retry_count = rc - 1 end
      job.enqueued_at = tonumber(enq)
      job.qdeck_redriven = stamped
      job.qdeck_redriven_at = at
      out = cjson.encode(job)
    end
    r("SADD", KEYS[2], job.queue)
    r("LPUSH", ns .. "queue:" .. job.queue, out)
    r("ZREM", KEYS[1], m)
    moved = moved + 1
  end
end
return {moved, bad}
"#;

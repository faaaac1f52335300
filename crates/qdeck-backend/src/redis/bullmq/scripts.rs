//! BullMQ's Lua scripts. Each mutating one handles a whole batch in one script run: Redis runs
//! a script atomically, so a crash of qdeck (or of the connection) leaves every job either
//! before or after the move, never in neither place. The moves follow BullMQ's own scripts
//! (reprocessJob, drain, cleanJobsInSet).

/// One BullMQ queue's figures, read-only.
/// KEYS: wait paused prioritized active delayed failed completed meta metrics:completed
/// ARGV[1]: job key prefix (`bull:q:`).
/// Returns: exists, wait, paused, prioritized, active, delayed, failed, completed,
/// metrics count (-1 none), paused flag, version, oldest waiting timestamp (-1 none),
/// oldest failed finishedOn (-1 none).
pub const BULL_FIGURES: &str = r#"
local r = redis.call
local exists = r("EXISTS", KEYS[8], KEYS[1], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local function oldest(list)
  local id = r("LINDEX", list, -1)
  -- BullMQ 4 left "0:..." markers at the tail of the wait list.
  if id and string.sub(id, 1, 2) == "0:" then id = r("LINDEX", list, -2) end
  if not id then return -1 end
  local ts = r("HGET", ARGV[1] .. id, "timestamp")
  return tonumber(ts) or -1
end
local ow = oldest(KEYS[1])
local op = oldest(KEYS[2])
if ow < 0 or (op >= 0 and op < ow) then ow = op end
local of = -1
local f = r("ZRANGE", KEYS[6], 0, 0, "WITHSCORES")
if f[2] then of = tonumber(f[2]) or -1 end
local mc = tonumber(r("HGET", KEYS[9], "count") or "-1") or -1
local meta = r("HMGET", KEYS[8], "paused", "version")
return {exists, r("LLEN", KEYS[1]), r("LLEN", KEYS[2]), r("ZCARD", KEYS[3]), r("LLEN", KEYS[4]),
  r("ZCARD", KEYS[5]), r("ZCARD", KEYS[6]), r("ZCARD", KEYS[7]), mc,
  meta[1] and 1 or 0, meta[2] or "", ow, of}
"#;

/// Retry failed BullMQ jobs as Job#retry('failed') does (reprocessJob), a batch at a time.
/// KEYS: failed wait meta active marker prioritized pc events
/// ARGV: job key prefix, max, then explicit job ids (optional).
/// Returns: moved, ids not found in the failed set or without a job hash.
pub const BULL_RETRY: &str = r#"
local r = redis.call
local prefix = ARGV[1]
local ids = {}
if #ARGV > 2 then
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = r("ZRANGE", KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
local meta = r("HMGET", KEYS[3], "paused", "concurrency", "opts.maxLenEvents")
local pausedOrMaxed = meta[1] ~= false
if not pausedOrMaxed and meta[2] then
  pausedOrMaxed = r("LLEN", KEYS[4]) >= tonumber(meta[2])
end
local maxEvents = meta[3]
if not maxEvents then
  maxEvents = 10000
  r("HSET", KEYS[3], "opts.maxLenEvents", maxEvents)
end
local moved, missing = 0, 0
local t = r("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, id in ipairs(ids) do
  local jobKey = prefix .. id
  if r("EXISTS", jobKey) == 1 and r("ZREM", KEYS[1], id) == 1 then
    r("HDEL", jobKey, "finishedOn", "processedOn", "failedReason")
    -- qdeck's redrive stamp (fields BullMQ does not read): how often and when, so a job that
    -- fails again shows it came back after a redrive.
    r("HINCRBY", jobKey, "qdeckRedriven", 1)
    r("HSET", jobKey, "qdeckRedrivenAt", now)
    local priority = tonumber(r("HGET", jobKey, "priority")) or 0
    if priority == 0 then
      local push = "LPUSH"
      local ok, opts = pcall(cjson.decode, r("HGET", jobKey, "opts") or "{}")
      if ok and type(opts) == "table" and opts.lifo == true then push = "RPUSH" end
      r(push, KEYS[2], id)
    else
      local c = r("INCR", KEYS[7])
      r("ZADD", KEYS[6], priority * 0x100000000 + c % 0x100000000, id)
    end
    if not pausedOrMaxed then r("ZADD", KEYS[5], 0, "0") end
    local parentKey = r("HGET", jobKey, "parentKey")
    if parentKey and r("EXISTS", parentKey) == 1 then
      if r("ZREM", parentKey .. ":unsuccessful", jobKey) == 1 or
        r("HDEL", parentKey .. ":failed", jobKey) == 1 then
        r("SADD", parentKey .. ":dependencies", jobKey)
      end
    end
    r("XADD", KEYS[8], "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", id, "prev", "failed")
    moved = moved + 1
  else
    missing = missing + 1
  end
end
return {moved, missing}
"#;

/// Remove up to ARGV[2] jobs from one list or sorted set and every key of each job, in one
/// step, so no job hash is left without its entry (BullMQ's drain / clean).
/// KEYS[1]: the wait/paused list or the prioritized/failed sorted set
/// ARGV: job key prefix, batch size, "list" | "zset".
/// Returns the number of jobs removed.
pub const BULL_REMOVE_BATCH: &str = r#"
local r = redis.call
local prefix = ARGV[1]
local n = tonumber(ARGV[2])
local ids
if ARGV[3] == "list" then
  ids = r("LRANGE", KEYS[1], -n, -1)
  if #ids > 0 then r("LTRIM", KEYS[1], 0, -(#ids + 1)) end
else
  ids = r("ZRANGE", KEYS[1], 0, n - 1)
  if #ids > 0 then r("ZREM", KEYS[1], unpack(ids)) end
end
for _, id in ipairs(ids) do
  local jobKey = prefix .. id
  local deid = r("HGET", jobKey, "deid")
  if deid then r("DEL", prefix .. "de:" .. deid) end
  r("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies", jobKey .. ":processed",
    jobKey .. ":failed", jobKey .. ":unsuccessful", jobKey .. ":lock")
end
return #ids
"#;

/// Remove chosen failed BullMQ jobs, as Job#remove does for a failed job: out of the failed
/// set, then the job hash and its side keys. An id no longer in the set is left alone (it was
/// retried or removed since the browse).
/// KEYS: the failed set. ARGV: job key prefix, ids... Returns: removed.
pub const BULL_REMOVE_IDS: &str = r#"
local r = redis.call
local prefix = ARGV[1]
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if r("ZREM", KEYS[1], id) == 1 then
    local jobKey = prefix .. id
    local deid = r("HGET", jobKey, "deid")
    if deid then r("DEL", prefix .. "de:" .. deid) end
    r("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies", jobKey .. ":processed",
      jobKey .. ":failed", jobKey .. ":unsuccessful", jobKey .. ":lock")
    n = n + 1
  end
end
return n
"#;

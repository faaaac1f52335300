//! RQ's Lua scripts. Key names are RQ's own, fixed in its source (rq 2.x: `rq:queue:`,
//! `rq:job:`, `rq:wip:`, `rq:failed:`, `rq:scheduled:`, `rq:deferred:`, `rq:results:`); RQ has
//! no key prefix setting. Every mutating script handles a whole batch in one run, so Redis
//! applies it atomically: a job is in its failed registry or back in its queue, never both,
//! never neither.

/// Figures of many RQ queues in one read-only run (a queue and its failed registry share
/// them, and one script call per queue would cost Redis more in call overhead than the reads).
/// KEYS: the `rq:queues` set, then per queue: its list, started registry (wip), scheduled,
/// deferred and failed registries.
/// ARGV: job key prefix (`rq:job:`), then per queue its key as listed in `rq:queues`.
/// Returns per queue: list length, head job's enqueued_at ("" none), started, scheduled,
/// deferred, failed, oldest failed job's ended_at ("" none), listed in rq:queues (1/0), head
/// job id.
pub const RQ_FIGURES: &str = r#"
local r = redis.call
local out = {}
for q = 0, #ARGV - 2 do
  local k = 1 + q * 5
  local head = r("LINDEX", KEYS[k + 1], 0)
  local enq = ""
  if head then enq = r("HGET", ARGV[1] .. head, "enqueued_at") or "" end
  local f = r("ZRANGE", KEYS[k + 5], 0, 0)
  local ended = ""
  if f[1] then ended = r("HGET", ARGV[1] .. f[1], "ended_at") or "" end
  out[#out + 1] = {r("LLEN", KEYS[k + 1]), enq, r("ZCARD", KEYS[k + 2]), r("ZCARD", KEYS[k + 3]),
    r("ZCARD", KEYS[k + 4]), r("ZCARD", KEYS[k + 5]), ended, r("SISMEMBER", KEYS[1], ARGV[q + 2]),
    head or ""}
end
return out
"#;

/// Requeue failed jobs as RQ's FailedJobRegistry.requeue (Job#requeue, requeue_job) does: the
/// id leaves the failed registry, the job hash gets started_at, ended_at and exc_info cleared,
/// status `queued` and a new enqueued_at, the job's `ttl` (if any) is applied again, and the
/// id is pushed at the back of its origin queue (RPUSH, as Queue#push_job_id), which is
/// registered in `rq:queues` as Queue#enqueue_job does. A job whose hash is gone or names no
/// origin is left in the registry and counted as unreadable.
/// KEYS: the failed registry, `rq:queues`.
/// ARGV: job key prefix, queue key prefix, now (RQ's timestamp text), now in ms, max, skip
/// (unreadable jobs left at the head by earlier batches), ids...
/// Returns: moved, missing or unreadable.
pub const RQ_REQUEUE: &str = r#"
local r = redis.call
local jp, qp, now, now_ms, max = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local skip = tonumber(ARGV[6])
local ids = {}
if #ARGV > 6 then
  for i = 7, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = r("ZRANGE", KEYS[1], skip, skip + max - 1)
end
local moved, bad = 0, 0
for _, id in ipairs(ids) do
  local key = jp .. id
  local origin = r("HGET", key, "origin")
  if origin and origin ~= "" and r("ZSCORE", KEYS[1], id) then
    r("ZREM", KEYS[1], id)
    r("HSET", key, "started_at", "", "ended_at", "", "exc_info", "", "status", "queued",
      "enqueued_at", now)
    -- qdeck's redrive stamp (fields RQ does not read): how often and when (Unix ms).
    r("HINCRBY", key, "qdeck_redriven", 1)
    r("HSET", key, "qdeck_redriven_at", now_ms)
    local ttl = tonumber(r("HGET", key, "ttl") or "")
    if ttl and ttl > 0 then
      r("EXPIRE", key, ttl)
      r("EXPIRE", key .. ":dependents", ttl)
    end
    r("SADD", KEYS[2], qp .. origin)
    r("RPUSH", qp .. origin, id)
    moved = moved + 1
  else
    bad = bad + 1
  end
end
return {moved, bad}
"#;

/// Delete a job's keys as Job#delete does (the hash, its dependents and dependencies sets,
/// its executions) and its results stream, which RQ otherwise leaves to expire: once the job
/// is gone nothing reads them.
const RQ_DELETE_JOB: &str = r#"
local function delete_job(jp, id)
  local key = jp .. id
  for _, e in ipairs(redis.call("ZRANGE", "rq:executions:" .. id, 0, -1)) do
    redis.call("DEL", "rq:execution:" .. id .. ":" .. e)
  end
  -- RQ 2.x names the dependencies set `rq:job::ID:dependencies` (two colons); both go.
  redis.call("DEL", key, key .. ":dependents", key .. ":dependencies",
    jp .. ":" .. id .. ":dependencies", "rq:executions:" .. id, "rq:results:" .. id)
end
"#;

/// Remove up to ARGV[2] jobs from a queue list (from its head, as Queue#empty pops them) or a
/// registry (lowest score first) with every key of each job, in one step.
/// KEYS[1]: the list or sorted set. ARGV: job key prefix, batch size, "list" | "zset".
/// Returns the number removed.
pub fn rq_remove_batch() -> String {
    format!(
        "{RQ_DELETE_JOB}{}",
        r#"
local jp, n = ARGV[1], tonumber(ARGV[2])
local ids
if ARGV[3] == "list" then
  ids = redis.call("LRANGE", KEYS[1], 0, n - 1)
  if #ids > 0 then redis.call("LTRIM", KEYS[1], #ids, -1) end
else
  ids = redis.call("ZRANGE", KEYS[1], 0, n - 1)
  if #ids > 0 then redis.call("ZREM", KEYS[1], unpack(ids)) end
end
for _, id in ipairs(ids) do delete_job(jp, id) end
return #ids
"#
    )
}

/// Remove chosen jobs from a failed registry with their keys; an id no longer there (requeued
/// or removed since the browse) is left alone.
/// KEYS: the registry. ARGV: job key prefix, ids... Returns: removed.
pub fn rq_remove_ids() -> String {
    format!(
        "{RQ_DELETE_JOB}{}",
        r#"
local n = 0
for i = 2, #ARGV do
  if redis.call("ZREM", KEYS[1], ARGV[i]) == 1 then
    delete_job(ARGV[1], ARGV[i])
    n = n + 1
  end
end
return n
"#
    )
}

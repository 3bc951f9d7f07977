-- ctrlscope telemetry protocol v1: apply one frame atomically (redis-layout.md, "Writing a frame").
-- Every publisher runs this very file (EVAL / EVALSHA), so that appending the frame to the stream
-- and updating the snapshot hash happen in one step: the hash is exact as of the id in its __id__.
--
-- KEYS[1] {prefix}stream:{topic}   the topic's stream
-- KEYS[2] {prefix}snap:{topic}     the topic's snapshot hash
-- KEYS[3] {prefix}epoch            the epoch token
-- KEYS[4] {prefix}topics           the set of known topics
-- KEYS[5] {prefix}pubseq:{topic}   publisher id -> last applied frame seq
-- In a Redis Cluster (redis-layout.md, "Redis Cluster") there are four KEYS, all in the topic's slot:
-- {prefix}stream:{T}, {prefix}snap:{T}, {prefix}epoch:{T}, {prefix}pubseq:{T}; the topic set lives in
-- another slot, so the publisher SADDs it itself and this script leaves it alone.
--
-- ARGV[1] epoch    the token the publisher read (GET {prefix}epoch)
-- ARGV[2] maxlen   XADD MAXLEN ~ for this topic's stream
-- ARGV[3] frame    the frame's JSON bytes, stored as the entry's only field, "f"
-- ARGV[4] topic    added to {prefix}topics
-- ARGV[5] publisher, ARGV[6] seq (integer; strictly increasing per topic and publisher)
-- ARGV[7] reset    "1": delete the snapshot hash before writing (a reset frame), else "0"
-- ARGV[8] nset     how many key/value pairs follow
-- ARGV[9 .. 8+2*nset]  state key, JSON value, key, value, ... (HSET into the snapshot)
-- ARGV[9+2*nset .. #ARGV]  state keys to delete (HDEL from the snapshot)
--
-- Returns {1, id}     applied; id is the new stream entry's id, now also the hash's __id__
--         {2, ""}     this seq was already applied for this publisher (a retry after a lost reply)
--         {0, epoch}  the epoch differs: the current token, or nil if there is none (Redis lost its
--                     data); nothing was written, the publisher must reset (redis-layout.md)
local topics, pubseq = KEYS[4], KEYS[5]
if #KEYS == 4 then topics, pubseq = nil, KEYS[4] end
local epoch = redis.call('GET', KEYS[3])
if epoch ~= ARGV[1] then return {0, epoch} end
local seq = tonumber(ARGV[6])
local last = tonumber(redis.call('HGET', pubseq, ARGV[5]) or '-1')
if seq <= last then return {2, ''} end
if ARGV[7] == '1' then redis.call('DEL', KEYS[2]) end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'f', ARGV[3])
-- HSET and HDEL in batches of 1000 arguments: unpack() of a whole relist would overflow Lua's stack.
local nset = tonumber(ARGV[8])
local i = 9
local stop = 9 + 2 * nset
while i < stop do
  local j = math.min(i + 999, stop - 1)
  redis.call('HSET', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local n = #ARGV
while i <= n do
  local j = math.min(i + 999, n)
  redis.call('HDEL', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
redis.call('HSET', KEYS[2], '__id__', id)
redis.call('HSET', pubseq, ARGV[5], ARGV[6])
redis.call('EXPIRE', pubseq, 86400)
if topics then redis.call('SADD', topics, ARGV[4]) end
return {1, id}

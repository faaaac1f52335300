#!/usr/bin/env bash
# Runs a command and prints, per RabbitMQ queue, the work its queue process did meanwhile
# (Erlang reductions). Wall time varies run to run with the broker's load; this count of work
# does not, so it compares redrive strategies on a busy or shared machine. A classic queue is
# one Erlang process: when it is the bottleneck, fewer reductions there mean a faster redrive.
# Quorum queues are not counted: a quorum queue's record names a Raft member ({Name, Node}),
# not one process, so `is_pid` leaves it out (with QDECK_BENCH_QUEUE_TYPE=quorum the bench's
# queues do not appear; read the broker CPU line the bench prints instead).
#   scripts/rabbitmq_queue_work.sh CMD ARGS...
#   QDECK_BENCH_WRAP=scripts/rabbitmq_queue_work.sh scripts/bench_filtered_redrive.sh
# Needs rabbitmqctl on this machine, allowed to reach the node (root or the rabbitmq user).
# Each snapshot costs the broker about a second of CPU, outside the command's own work, and
# adds that second to any wall time measured around this script.
set -uo pipefail

snapshot() {
  rabbitmqctl eval '
    [{<<(element(2, amqqueue:get_name(Q)))/binary, "/", (element(4, amqqueue:get_name(Q)))/binary>>, R}
     || Q <- rabbit_amqqueue:list(),
        P <- [amqqueue:get_pid(Q)], is_pid(P),
        {reductions, R} <- [erlang:process_info(P, reductions)]].' 2>/dev/null | tr -d '\n'
}

before="$(snapshot)"
"$@"
rc=$?
after="$(snapshot)"
python3 - "$before" "$after" <<'PY' >&2
import re, sys
def parse(s):
    return {k: int(v) for k, v in re.findall(r'\{\s*<<"([^"]*)">>\s*,\s*(\d+)\s*\}', s)}
a, b = parse(sys.argv[1]), parse(sys.argv[2])
if not b:
    print("rabbitmq_queue_work: no queue figures (is rabbitmqctl allowed to reach the node?)")
for name in sorted(b):
    d = b[name] - a.get(name, 0)
    if d > 100_000:
        print(f"queue {name} (vhost/queue): {d / 1e6:.1f} M reductions")
PY
exit "$rc"

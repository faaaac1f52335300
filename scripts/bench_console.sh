#!/usr/bin/env bash
# Console figures of issue 14 at 100,000 local queues, from the real release binary in a
# pseudo-terminal of 200×50 (python's pty: the same terminal path a user has, output drained
# as a terminal would):
#   1. first frame after the queue list arrives (target < 300 ms),
#   2. frame draw time at 200×50 (target < 2 ms; mean and worst, keys scrolling plus polls),
#   3. RSS after MINUTES (target < 300 MB after 10 min; with fewer minutes the slope over the
#      idle part is printed and projected to 10 min),
#   4. idle CPU in % of one core, no key pressed (target < 3 %).
# Figures 1 and 2 come from the console's own log lines (src/tui/frame_stats.rs: timed around
# `terminal.draw`, the whole frame including the diff written to the terminal); 3 and 4 from
# /proc/PID. A reference run with REF_QUEUES queues (same binary, same terminal, REF_SECS) is
# made in the same go and each figure is printed with the ratio 100k / reference.
#
# Usage: scripts/bench_console.sh [MINUTES]   (default 10)
# Env: QDECK_BIN (default target/release/qdeck, built when missing),
#      QDECK_BENCH_QUEUES (default 100000), QDECK_BENCH_REF_QUEUES (default 100),
#      QDECK_BENCH_REF_SECS (default 60), QDECK_BENCH_REFRESH (refresh_secs, default 2).
# Needs: python3 (with sqlite3). Everything lives in a temporary directory removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${1:-10}"
NQ="${QDECK_BENCH_QUEUES:-100000}"
NREF="${QDECK_BENCH_REF_QUEUES:-100}"
REF_SECS="${QDECK_BENCH_REF_SECS:-60}"
REFRESH="${QDECK_BENCH_REFRESH:-2}"
BIN="${QDECK_BIN:-target/release/qdeck}"

if [ ! -x "$BIN" ]; then
  echo "== building $BIN (release; takes a few minutes)"
  cargo build --release --bin qdeck
fi
BIN="$(realpath "$BIN")"

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# One local broker with $2 queues (a tenth of them holding a few messages, so figures move),
# in directory $1, with its own XDG directories and configuration.
setup() {
  local dir="$1" n="$2"
  mkdir -p "$dir/config/qdeck" "$dir/data" "$dir/state"
  cat > "$dir/config/qdeck/config.toml" <<EOF
[ui]
refresh_secs = $REFRESH

[[profiles]]
name = "bench"
kind = "local"
path = "$dir/bench.db"
EOF
  XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/data" XDG_STATE_HOME="$dir/state" \
    "$BIN" create bench-seed >/dev/null
  XDG_CONFIG_HOME="$dir/config" XDG_DATA_HOME="$dir/data" XDG_STATE_HOME="$dir/state" \
    "$BIN" send bench-seed seed >/dev/null
  python3 - "$dir/bench.db" "$n" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
c.executemany(
    "INSERT OR IGNORE INTO queues(name, created_ms) VALUES(?, ?)",
    ((f"bench-q-{i:06d}", now) for i in range(n - 1)),
)
# Copies of the seed message (every column as the broker wrote it) in every tenth queue.
cols = [r[1] for r in c.execute("PRAGMA table_info(messages)") if r[1] != "id"]
seed = c.execute(f"SELECT {', '.join(cols)} FROM messages WHERE queue = 'bench-seed'").fetchone()
qi = cols.index("queue")
rows = []
for i in range(0, n - 1, 10):
    for k in range(3):
        r = list(seed)
        r[qi] = f"bench-q-{i:06d}"
        rows.append(r)
c.executemany(
    f"INSERT INTO messages({', '.join(cols)}) VALUES({', '.join('?' * len(cols))})", rows
)
c.commit()
PY
}

# Drive the console in a 200×50 pty for $2 seconds in directory $1; print "key value" lines.
drive() {
  python3 - "$BIN" "$1" "$2" <<'PY'
import fcntl, os, pty, re, struct, sys, termios, threading, time
bin_, d, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
env = dict(os.environ, XDG_CONFIG_HOME=f"{d}/config", XDG_DATA_HOME=f"{d}/data",
           XDG_STATE_HOME=f"{d}/state", TERM="xterm-256color", QDECK_LOG="info")
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    os.execve(bin_, [bin_], env)
seen = bytearray()
def drain():
    while True:
        try:
            b = os.read(fd, 65536)
        except OSError:
            return
        if not b:
            return
        if len(seen) < 1 << 20:
            seen.extend(b)
threading.Thread(target=drain, daemon=True).start()
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
def rss_mb():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
start = time.monotonic()
def key(k):
    os.write(fd, k)
# Wait for the table, then scroll (frames driven by keys), then leave it alone.
while b"bench-q-" not in seen and time.monotonic() - start < 60:
    time.sleep(0.05)
time.sleep(2)
for i in range(200):
    key(b"j" if (i // 50) % 2 == 0 else b"k")
    time.sleep(0.05)
key(b"G"); time.sleep(0.3); key(b"g")
warm = 20.0
idle_from = time.monotonic()
samples = []
cpu0 = None
while time.monotonic() - start < secs:
    t = time.monotonic() - idle_from
    if cpu0 is None and t >= warm:
        cpu0, t0 = cpu(), t
    samples.append((t, rss_mb()))
    time.sleep(5)
cpu1, t1 = cpu(), time.monotonic() - idle_from
rss_end = rss_mb()
key(b":q!\r")
for _ in range(100):
    if os.waitpid(pid, os.WNOHANG)[0]:
        break
    time.sleep(0.1)
else:
    os.kill(pid, 9)
idle = [(t, r) for t, r in samples if t >= warm]
slope = 0.0
if len(idle) >= 2:
    mt = sum(t for t, _ in idle) / len(idle)
    mr = sum(r for _, r in idle) / len(idle)
    den = sum((t - mt) ** 2 for t, _ in idle)
    slope = sum((t - mt) * (r - mr) for t, r in idle) / den * 60 if den else 0.0
print(f"rss_end_mb {rss_end:.1f}")
print(f"rss_slope_mb_per_min {slope:.2f}")
print(f"run_min {(time.monotonic() - start) / 60:.2f}")
if cpu0 is not None:
    print(f"idle_cpu_pct {(cpu1 - cpu0) / (t1 - t0) * 100:.2f}")
log = open(f"{d}/state/qdeck/qdeck.log", encoding="utf-8", errors="replace").read()
m = re.search(r"first frame after the queue list: ([\d.]+) ms \((\d+) queues", log)
if m:
    print(f"first_frame_ms {m.group(1)}")
    print(f"queues {m.group(2)}")
frames, total, worst = 0, 0.0, 0.0
for n, mean, w in re.findall(r"frames: (\d+) in [\d.]+ s, draw mean (\d+) µs, worst (\d+) µs at 200x50", log):
    frames += int(n); total += int(n) * int(mean); worst = max(worst, int(w))
if frames:
    print(f"frames {frames}")
    print(f"draw_mean_ms {total / frames / 1000:.3f}")
    print(f"draw_worst_ms {worst / 1000:.3f}")
PY
}

echo "== reference: $NREF queues, ${REF_SECS} s"
setup "$TMP/ref" "$NREF"
drive "$TMP/ref" "$REF_SECS" > "$TMP/ref.txt"
echo "== $NQ queues, $MINUTES min"
setup "$TMP/big" "$NQ"
drive "$TMP/big" "$((MINUTES * 60))" > "$TMP/big.txt"

python3 - "$TMP/ref.txt" "$TMP/big.txt" "$MINUTES" <<'PY'
import sys
def read(p):
    return {k: float(v) for k, v in (l.split() for l in open(p) if l.strip())}
ref, big, minutes = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
def line(name, key, unit, target, fmt="{:.1f}"):
    b, r = big.get(key), ref.get(key)
    if b is None:
        print(f"{name}: no figure (see the console log)")
        return
    ratio = f", {b / r:.2f}x the {int(ref.get('queues', 0))}-queue reference ({fmt.format(r)} {unit})" if r else ""
    verdict = "ok" if b < target else "MISSED"
    print(f"{name}: {fmt.format(b)} {unit} (target < {target} {unit}: {verdict}){ratio}")
print(f"console at {int(big.get('queues', 0))} queues, 200x50 pty, {big.get('run_min', 0):.1f} min "
      f"({int(big.get('frames', 0))} frames):")
line("first frame after the queue list", "first_frame_ms", "ms", 300)
line("frame draw, mean", "draw_mean_ms", "ms", 2, "{:.3f}")
line("frame draw, worst", "draw_worst_ms", "ms", 2, "{:.3f}")
line(f"RSS after {big.get('run_min', 0):.1f} min", "rss_end_mb", "MB", 300)
proj = big["rss_end_mb"] + big["rss_slope_mb_per_min"] * max(0.0, 10 - big.get("run_min", 0))
print(f"RSS slope while idle: {big['rss_slope_mb_per_min']:+.2f} MB/min -> projected at 10 min: "
      f"{proj:.1f} MB (target < 300 MB: {'ok' if proj < 300 else 'MISSED'})")
line("idle CPU", "idle_cpu_pct", "% of a core", 3, "{:.2f}")
PY

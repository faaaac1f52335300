#!/usr/bin/env bash
# Performance figures of issue 39 (Kafka), from one run on one broker, each against a reference
# made by Kafka's own Java client in the same go:
#   1. one lag poll of GROUPS groups over TOPICS × PARTITIONS partitions: qdeck's requests per
#      Kafka API (a bounded count, not one per group) and its warm wall time against a warm Java
#      Admin making the same describe and offset calls (target ≤ 1.0×);
#   2. the command as users feel it, each started cold: `qdeck ls` against ConsumerGroupCommand
#      --describe of the same groups, then against ShareGroupCommand --describe of SHARE_GROUPS
#      share groups (target ≤ 0.2× each);
#   3. redrive of MESSAGES × 1 KB dead letters: qdeck's redrive of a Spring dead-letter topic
#      against a warm Java consume → produce loop (target ≥ 0.8×), and nothing lost.
#
# Env: QDECK_TEST_KAFKA_BOOTSTRAP, QDECK_TEST_KAFKA_SCENES (scripts/kafka_up.sh prints both),
#      QDECK_BENCH_TOPICS (50), QDECK_BENCH_PARTITIONS (20), QDECK_BENCH_GROUPS (200),
#      QDECK_BENCH_SHARE_GROUPS (20), QDECK_BENCH_MESSAGES (20000), QDECK_BENCH_RUNS (cold runs, median; 5), QDECK_BENCH_KEEP=1
#      keeps the scene's topics and groups,
#      CARGO_TARGET_DIR as usual. qdeck is built with --release.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${QDECK_TEST_KAFKA_BOOTSTRAP:?run scripts/kafka_up.sh and export what it prints}"
: "${QDECK_TEST_KAFKA_SCENES:?run scripts/kafka_up.sh and export what it prints}"
BS="$QDECK_TEST_KAFKA_BOOTSTRAP"
TOPICS="${QDECK_BENCH_TOPICS:-50}"
PARTS="${QDECK_BENCH_PARTITIONS:-20}"
GROUPS_N="${QDECK_BENCH_GROUPS:-200}"
SHARES="${QDECK_BENCH_SHARE_GROUPS:-20}"
N="${QDECK_BENCH_MESSAGES:-20000}"
RUNS="${QDECK_BENCH_RUNS:-5}"
LIBS="${QDECK_TEST_KAFKA_SCENES#*:}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
PREFIX="bench$(date +%s)-"
export QDECK_BENCH_KAFKA_PREFIX="$PREFIX"

javac -nowarn -d "$TMP/classes" -cp "$LIBS" tests/fixtures/kafka/bench/KafkaBench.java
bench() { java -Xmx512m -cp "$TMP/classes:$LIBS" KafkaBench "$1" "$BS" "${@:2}" | grep '^{'; }
groups_of() { java -Xmx512m -cp "$TMP/classes:$LIBS" KafkaBench "$1" "$BS" "$2" | tail -n1; }
field() { python3 -c 'import json,sys; print(json.loads(sys.stdin.read())[sys.argv[1]])' "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now_ms() { date +%s%3N; }

echo "== building qdeck (release)"
cargo build --release --quiet
QDECK="${CARGO_TARGET_DIR:-target}/release/qdeck"

echo "== scene: $GROUPS_N groups over $TOPICS topics × $PARTS partitions (prefix $PREFIX)"
bench setup "$PREFIX" "$TOPICS" "$PARTS" "$GROUPS_N" 20

echo "== 1. one lag poll, warm"
java_poll="$(bench poll "$PREFIX" 7)"
echo "java Admin: $java_poll"
qdeck_poll="$(cargo test --release --quiet --test kafka_bench -- --ignored --nocapture manual_kafka_poll_benchmark 2>/dev/null | grep '^{')"
echo "qdeck:      $qdeck_poll"
jl="$(echo "$java_poll" | field lag)"; ql="$(echo "$qdeck_poll" | field lag)"
[[ "$jl" == "$ql" ]] || echo "!! lag differs: Java $jl, qdeck $ql"
jm="$(echo "$java_poll" | field median_ms)"; qm="$(echo "$qdeck_poll" | field warm_poll_median_ms)"
echo "poll ratio qdeck/java: $(python3 -c "print(round($qm/$jm, 2))") (target ≤ 1.0)"

echo "== 2. cold commands, median of $RUNS"
mkdir -p "$TMP/home"
run_qdeck() { env HOME="$TMP/home" XDG_STATE_HOME="$TMP/home/state" XDG_DATA_HOME="$TMP/home/data" QDECK_CONFIG="$TMP/config.toml" "$QDECK" "$@"; }
# Profile k holds the classic groups (PREFIXg*), profile s the share groups (PREFIXs*).
cat > "$TMP/config.toml" <<EOF
default_profile = "k"
[[profiles]]
name = "k"
kind = "kafka"
bootstrap_servers = "$BS"
topics = "^$PREFIX"
groups = "^${PREFIX}g|^qdeck-redrive"
[[profiles]]
name = "s"
kind = "kafka"
bootstrap_servers = "$BS"
topics = "^$PREFIX"
groups = "^${PREFIX}s"
EOF
# cold PROFILE TOOL ARGS...: the median of RUNS cold `qdeck ls` and of RUNS cold TOOL --describe
# (a main class of kafka-tools), in qc and jc; the rows qdeck printed in rows.
cold() {
  local profile="$1" tool="$2"; shift 2
  local qs=() js=() t0 t1
  for _ in $(seq "$RUNS"); do
    t0=$(now_ms); run_qdeck ls -p "$profile" -o json > "$TMP/ls.json"; t1=$(now_ms)
    qs+=($((t1 - t0)))
    t0=$(now_ms)
    java -cp "$LIBS" "$tool" --bootstrap-server "$BS" --describe "$@" > "$TMP/tool.txt" 2>/dev/null || true
    t1=$(now_ms)
    js+=($((t1 - t0)))
  done
  qc="$(printf '%s\n' "${qs[@]}" | median)"; jc="$(printf '%s\n' "${js[@]}" | median)"
  rows="$(python3 -c "import json;print(len(json.load(open('$TMP/ls.json'))))")"
}
# The same groups on both sides: each tool is given each of the scene's groups.
group_args=(); for g in $(groups_of groups "$PREFIX"); do group_args+=(--group "$g"); done
cold k org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "${group_args[@]}"
echo "qdeck ls: ${qc} ms; ConsumerGroupCommand --describe of the same $((${#group_args[@]} / 2)) groups: ${jc} ms; rows $rows"
echo "cold ratio qdeck/java: $(python3 -c "print(round($qc/$jc, 3))") (target ≤ 0.2)"

echo "== 2b. $SHARES share groups, each read once by a KafkaShareConsumer"
bench shares "$PREFIX" "$TOPICS" "$SHARES"
share_args=(); for g in $(groups_of share-groups "$PREFIX"); do share_args+=(--group "$g"); done
cold s org.apache.kafka.tools.consumer.group.ShareGroupCommand "${share_args[@]}"
grep -q "^${PREFIX}s" "$TMP/tool.txt" || echo "!! ShareGroupCommand printed no group of the scene"
echo "qdeck ls: ${qc} ms; ShareGroupCommand --describe of the same $((${#share_args[@]} / 2)) share groups: ${jc} ms; rows $rows"
echo "share cold ratio qdeck/java: $(python3 -c "print(round($qc/$jc, 3))") (target ≤ 0.2)"

echo "== 3. redrive of $N × 1 KB dead letters"
bench dead "${PREFIX}orders" "${PREFIX}orders-dlt" "$N" 1024
java_copy="$(bench copy "${PREFIX}orders-dlt" "${PREFIX}javacopy")"
echo "java consume → produce: $java_copy"
t0=$(now_ms)
run_qdeck redrive "${PREFIX}orders-dlt" --yes -o json > "$TMP/redrive.json"
t1=$(now_ms)
arrived="$(bench count "${PREFIX}orders" | field records)"
qrate="$(python3 -c "print(round($N/(($t1-$t0)/1000)))")"
echo "qdeck redrive: $N in $((t1 - t0)) ms = $qrate/s; records in ${PREFIX}orders: $arrived (want $N)"
jr="$(echo "$java_copy" | field per_sec)"
echo "redrive ratio qdeck/java: $(python3 -c "print(round($qrate/$jr, 2))") (target ≥ 0.8)"
if [[ -z "${QDECK_BENCH_KEEP:-}" ]]; then
  echo "== dropping the scene: $(bench drop "$PREFIX")"
else
  echo "== the scene stays (prefix $PREFIX): KafkaBench drop $BS $PREFIX removes it"
fi

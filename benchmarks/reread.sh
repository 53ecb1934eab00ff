#!/usr/bin/env bash
# Re-read the table's rows: every benchmark that publishes rows, one after another, each alone on the machine.
#
#   bash benchmarks/reread.sh              # all of them, in the order below (about 3.3 hours on 2 CPU cores)
#   bash benchmarks/reread.sh run roles    # only these (names: the first word of each line in QUEUE)
#   bash benchmarks/reread.sh --dry-run    # print what it would run
#
# Any change under tuner/ makes every row stale (benchmarks/table.py), so after one, re-read them all in one queue
# on a quiet machine: nothing else running, no tests (a benchmark's `ray stop --force` ends their Ray too). Each
# benchmark's output goes to reports/reread/NAME.log and one line per start and end to reports/reread/queue.log;
# `touch reports/reread/stop` ends the queue once the running benchmark is done; the queue removes the file as it
# ends (stopped or not), so it never stops the next one. Then commit benchmarks/results/,
# re-quote the figures the docs quote by hand (benchmarks/README.md lists the pages), and run tests/benchmarks.
set -uo pipefail
cd "$(dirname "$0")/.."

# name | minutes on 2 cores (seen on an AMD EPYC host, 2026-12-04) | command
QUEUE=(
  "run|40|python benchmarks/run.py"
  "time_to_target|25|python benchmarks/time_to_target.py"
  "environment|24|python benchmarks/environment.py"
  "contention|16|python benchmarks/contention.py --load 2 --seconds 25 --out benchmarks/results/contention.json"
  "horizon|10|python benchmarks/horizon.py"
  "ttt_choices|12|python benchmarks/ttt_choices.py"
  "fixed_batch|2|python benchmarks/fixed_batch.py"
  "parity|4|python benchmarks/parity.py --steps 200"
  "noise_scale|1|python benchmarks/noise_scale.py"
  "goodput_rank|6|python benchmarks/goodput_rank.py"
  "stability_sim|5|python benchmarks/stability_sim.py"
  "quality_rank|1|python benchmarks/quality_rank.py"
  "multifidelity|1|python benchmarks/multifidelity.py --replay-only"
  "retrain|19|python benchmarks/retrain.py"
  "roles|15|python benchmarks/roles.py"
  "live_scheduler|14|python benchmarks/live_scheduler.py"
)

dry=0
wanted=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,/^set /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;  # the header comment
    *) wanted+=("$arg") ;;
  esac
done
names=" $(for entry in "${QUEUE[@]}"; do printf '%s ' "${entry%%|*}"; done)"
for name in "${wanted[@]+"${wanted[@]}"}"; do
  if [[ "$names" != *" $name "* ]]; then
    echo "reread.sh: error: no benchmark named '$name'; choose from:$names" >&2
    exit 2
  fi
done

log="${REREAD_DIR:-reports/reread}"  # REREAD_DIR: another folder (the tests use one)
[ "$dry" = 1 ] || mkdir -p "$log"
total=0
for entry in "${QUEUE[@]}"; do
  IFS='|' read -r name minutes command <<< "$entry"
  if [ "${#wanted[@]}" -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then
    continue
  fi
  total=$((total + minutes))
  if [ "$dry" = 1 ]; then
    printf '%-15s ~%3s min  %s\n' "$name" "$minutes" "$command"
    continue
  fi
  if [ -e "$log/stop" ]; then
    echo "$(date -u +%FT%TZ) stopped before $name ($log/stop exists; removed, so the next queue runs)" \
      | tee -a "$log/queue.log"
    break
  fi
  ray stop --force >/dev/null 2>&1  # what a benchmark before it may have left running
  echo "$(date -u +%FT%TZ) start $name (about $minutes min)" | tee -a "$log/queue.log"
  $command > "$log/$name.log" 2>&1
  rc=$?
  echo "$(date -u +%FT%TZ) end $name rc $rc" | tee -a "$log/queue.log"
  if [ "$name" = multifidelity ]; then  # the replay's combined file is scratch, not a published result
    for f in benchmarks/results/multifidelity-cnn-gan.json benchmarks/results/multifidelity-cnn-gan.md; do
      git ls-files --error-unmatch "$f" >/dev/null 2>&1 || rm -f "$f"
    done
  fi
done
if [ "$dry" = 1 ]; then
  echo "about $total min in all"
else
  rm -f "$log/stop"  # meant for this queue (touched during its last benchmark, or what stopped it): not the next
  echo "$(date -u +%FT%TZ) done; \`python benchmarks/table.py\` shows the table" | tee -a "$log/queue.log"
fi

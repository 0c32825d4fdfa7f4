#!/usr/bin/env bash
# Runs make targets in lanes: `tools/lanes.sh "LANE..." "TARGET [VAR=value]..." ...`
#   - each LANE of the first argument in the background, from the start: one scenario, or several
#     joined by `+` (`rolling+sglang_server`) run one after another, stopping at the first that
#     fails (`make molecule SCENARIO=name` each, output in .build/logs/molecule-NAME.log);
#   - every other argument, one make invocation each, one after another in the main lane,
#     stopping at the first that fails.
# The background lanes are the scenarios that mostly wait (a roll goes one host at a time): begun
# at once, they use the core the single-process checks of the main lane leave idle. Their logs
# are printed when they end. Exits non-zero if anything failed; a failed main lane stops the
# background lanes rather than leaving them to run for half an hour.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${LANES_LOGS:-$root/.build/logs}
mkdir -p "$logs"
make=${MAKE:-make}
# CPU seconds (user + system) of the children this shell has waited for: where the time goes.
# `times` must run in the shell itself (in $(...) or a pipe it would see a subshell's), so the
# figure goes to the file named by the first argument.
cpu_now() {
  local file="$logs/.times.$BASHPID"
  times >"$file"
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); sub(/s/, "", p[2]); n += p[1] * 60 + p[2] } printf "%.0f\n", n }' "$file" >"$1"
  rm -f "$file"
}
export -f cpu_now
export logs

# One scenario in a lane: its log, its exit status and its CPU seconds (in a subshell, whose
# children are only this scenario's).
lane_scenario() (
  local s=$1
  rm -f "$logs/molecule-$s.log" "$logs/molecule-$s.rc"
  $make --no-print-directory molecule SCENARIO="$s" >"$logs/molecule-$s.log" 2>&1
  echo $? >"$logs/molecule-$s.rc"
  cpu_now "$logs/molecule-$s.cpu"
  echo "lanes: scenario $s used $(cat "$logs/molecule-$s.cpu") CPU s" >>"$logs/molecule-$s.log"
  [ "$(cat "$logs/molecule-$s.rc")" = 0 ]
)

# A lane (`tools/lanes.sh --lane NAME...`, started below by this script itself): its scenarios one
# after another; one after a failed one does not run (its status reads "stopped").
if [ "${1:-}" = --lane ]; then
  shift
  for s in "$@"; do lane_scenario "$s" || exit 1; done
  exit 0
fi

read -r -a beside <<<"${1:-}"
shift || true
declare -A lane_pid
scenarios=()
for lane in "${beside[@]}"; do
  read -r -a members <<<"${lane//+/ }"
  for s in "${members[@]}"; do rm -f "$logs/molecule-$s.rc"; done
  scenarios+=("${members[@]}")
  # setsid: the lane and everything it starts form one process group, stopped together.
  setsid bash "$0" --lane "${members[@]}" &
  lane_pid[$lane]=$!
  echo "lanes: ${members[*]} run(s) beside the main lane (log: .build/logs/molecule-NAME.log)"
done

rc=0
failed_main=
for target in "$@"; do
  read -r -a words <<<"$target"
  start=$SECONDS
  # In a shell of its own, whose children are only this target's (this one's include the lanes).
  # Its output also goes to main.log, for the summary at the end.
  bash -c '"$@"; rc=$?; cpu_now "$logs/.cpu"; exit $rc' lane "$make" --no-print-directory "${words[@]}" 2>&1 \
    | tee "$logs/main.log"
  target_rc=${PIPESTATUS[0]}
  if [ "$target_rc" != 0 ]; then
    rc=$target_rc; echo "lanes: '$target' failed (rc $rc) after $((SECONDS - start)) s"; failed_main=$target; break
  fi
  echo "lanes: '$target' passed in $((SECONDS - start)) s, $(cat "$logs/.cpu") CPU s (at $SECONDS s)"
done

if [ "$rc" != 0 ]; then
  for lane in "${beside[@]}"; do
    kill -TERM -- "-${lane_pid[$lane]}" 2>/dev/null && echo "lanes: stopped lane $lane (the main lane failed)"
  done
fi
wait
for s in "${scenarios[@]}"; do
  [ -f "$logs/molecule-$s.log" ] && cat "$logs/molecule-$s.log"
  lane_rc=$(cat "$logs/molecule-$s.rc" 2>/dev/null || echo stopped)
  echo "lanes: scenario $s (run beside the main lane) exited $lane_rc"
  [ "$lane_rc" = 0 ] || rc=1
done
# The lanes' logs come last and are long: what failed is said again here, at the end, where a CI
# log's tail shows it (pytest's FAILED/ERROR lines and assertion lines, molecule's errors).
summary() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -aE '(^|[│ ])(FAILED|ERROR) |(^|[│ ])E +[A-Za-z]|fatal: \[|CRITICAL|Error:' | tail -n 40
}
if [ -n "$failed_main" ]; then
  echo "lanes: what failed in '$failed_main':"
  summary "$logs/main.log"
fi
for s in "${scenarios[@]}"; do
  lane_rc=$(cat "$logs/molecule-$s.rc" 2>/dev/null || echo stopped)
  if [ "$lane_rc" != 0 ] && [ "$lane_rc" != stopped ] && [ -f "$logs/molecule-$s.log" ]; then
    echo "lanes: what failed in scenario $s:"
    summary "$logs/molecule-$s.log"
  fi
done
cpu_now "$logs/.cpu"
echo "lanes: all done in $SECONDS s, $(cat "$logs/.cpu") CPU s in all, rc $rc"
exit "$rc"

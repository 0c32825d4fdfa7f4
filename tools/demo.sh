#!/usr/bin/env bash
# `make demo`: start the local systemd container hosts of inventories/local (group blackwell),
# run the main job against them and say what happened. `--destroy` removes the hosts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hosts=(inferops-demo-1 inferops-demo-2)

if [ "${1:-}" = --destroy ]; then
  exec "$root/tools/hosts.sh" --destroy "${hosts[@]}"
fi

"$root/tools/hosts.sh" "${hosts[@]}"

cd "$root"
start=$(date +%s)
ansible-playbook -i inventories/local/hosts.yml site.yml -l blackwell
echo
echo "demo: ran 'ansible-playbook site.yml -l blackwell' on ${hosts[*]} in $(( $(date +%s) - start )) s."
# Readiness as a client sees it, from inside each host (the server listens on 127.0.0.1 only).
for h in "${hosts[@]}"; do
  health=$(docker exec "$h" curl -s -o /dev/null -w '%{http_code}' --max-time 30 http://127.0.0.1:30000/health_generate || true)
  tokens=$(docker exec "$h" curl -s --max-time 30 -H 'Content-Type: application/json' \
    -d '{"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}' \
    http://127.0.0.1:30000/generate | python3 -c 'import json, sys; print(json.load(sys.stdin)["meta_info"]["completion_tokens"])' \
    2>/dev/null || echo none)
  echo "demo: $h: sglang-server $(docker exec "$h" systemctl is-active sglang-server.service || true),"\
    "/health_generate $health, POST /generate $tokens completion tokens"
done

echo "demo: the hosts keep running: 'docker exec -it ${hosts[0]} bash' to look, 'make clean' to remove them."

# Last, the read-only fleet report (playbooks/verify.yml): its log goes to a file, the table here.
report="$root/.build/fleet-report.json"
verify_log="$root/.build/demo-verify.log"
if ! ansible-playbook -i inventories/local/hosts.yml verify.yml -l blackwell -e "verify_report_path=$report" >"$verify_log" 2>&1; then
  cat "$verify_log"
  echo "demo: 'ansible-playbook verify.yml -l blackwell' failed (log above, also in $verify_log)." >&2
  exit 1
fi
echo
echo "demo: fleet report ('ansible-playbook verify.yml -l blackwell', read-only; JSON in $report):"
"$root/.build/venv/bin/python" -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["table"]))' "$report"

#!/usr/bin/env bash
# `make demo`: start the local systemd container hosts of inventories/local (group blackwell),
# run the main job against them and say what happened. `--destroy` removes the hosts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
hosts=(inferops-demo-1 inferops-demo-2)

if [ "${1:-}" = --destroy ]; then
  docker rm -f "${hosts[@]}" >/dev/null 2>&1 || true
  exit 0
fi

image=$("$root/tools/base-image.sh")
# The flags that let systemd run as PID 1 here (--privileged is refused: no CAP_SYS_RESOURCE).
systemd_flags=(--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined
  --security-opt apparmor=unconfined --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw
  --tmpfs /run --tmpfs /run/lock --stop-signal SIGRTMIN+3)
proxy_env=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && proxy_env+=(-e "$v=${!v}")
done

for h in "${hosts[@]}"; do
  current=$(docker inspect -f '{{.Config.Image}} {{.State.Running}}' "$h" 2>/dev/null || true)
  if [ "$current" != "$image true" ]; then
    docker rm -f "$h" >/dev/null 2>&1 || true
    docker run -d --name "$h" --hostname "$h" "${systemd_flags[@]}" "${proxy_env[@]}" "$image" /lib/systemd/systemd >/dev/null
    echo "demo: started $h from $image"
  fi
done
for h in "${hosts[@]}"; do
  timeout 60 docker exec "$h" systemctl is-system-running --wait >/dev/null || true
done

# The CI stack's SGLang stand-in comes from a wheelhouse on each host (tests/fixtures/).
# Keyed by the stand-in's sources: a changed stand-in is built again (same name and version).
standin="$root/tests/fixtures/sglang_standin"
key=$(cd "$standin" && find . -type f ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
wheelhouse="$root/.build/demo-wheelhouse/$key"
if [ ! -f "$wheelhouse/sglang-0.5.9-py3-none-any.whl" ]; then
  "$root/.build/venv/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps \
    -w "$wheelhouse" "$standin"
fi
# The model directory the server serves (the stand-in reads only its config.json).
for h in "${hosts[@]}"; do
  docker exec "$h" mkdir -p /opt/inferops-wheelhouse /srv/models/standin
  docker cp -q "$wheelhouse/." "$h:/opt/inferops-wheelhouse/"
  docker exec "$h" sh -c 'echo "{\"architectures\": [\"StandinForCausalLM\"]}" > /srv/models/standin/config.json'
done

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

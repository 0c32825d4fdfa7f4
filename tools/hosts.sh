#!/usr/bin/env bash
# Starts local systemd container hosts (a host already running from the current base image is
# kept) and lays out what the local inventories' CI stack expects on each: the SGLang stand-in
# in the wheelhouse /opt/inferops-wheelhouse and the model directory /srv/models/standin.
# Used by tools/demo.sh and the benchmarks (bench/).
#   tools/hosts.sh NAME...           start (or keep) and prepare the hosts
#   tools/hosts.sh --fresh NAME...   the same, from new containers (a cold host)
#   tools/hosts.sh --destroy NAME... remove them
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=keep
case "${1:-}" in
  --destroy) shift; [ $# = 0 ] || docker rm -f "$@" >/dev/null 2>&1 || true; exit 0 ;;
  --fresh) mode=fresh; shift ;;
esac
[ $# -gt 0 ] || { echo "usage: $0 [--fresh|--destroy] NAME..." >&2; exit 2; }

image=$("$root/tools/base-image.sh")
# The flags that let systemd run as PID 1 here (--privileged is refused: no CAP_SYS_RESOURCE).
systemd_flags=(--cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined
  --security-opt apparmor=unconfined --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw
  --tmpfs /run --tmpfs /run/lock --stop-signal SIGRTMIN+3)
proxy_env=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && proxy_env+=(-e "$v=${!v}")
done

for h in "$@"; do
  current=$(docker inspect -f '{{.Config.Image}} {{.State.Running}}' "$h" 2>/dev/null || true)
  if [ "$mode" = fresh ] || [ "$current" != "$image true" ]; then
    docker rm -f "$h" >/dev/null 2>&1 || true
    docker run -d --name "$h" --hostname "$h" "${systemd_flags[@]}" "${proxy_env[@]}" "$image" /lib/systemd/systemd >/dev/null
    echo "hosts: started $h from $image" >&2
  fi
done
for h in "$@"; do
  timeout 60 docker exec "$h" systemctl is-system-running --wait >/dev/null || true
done

# The CI stack's SGLang stand-in comes from a wheelhouse on each host (tests/fixtures/), its wheel
# built once per content of its sources.
wheel=$("$root/tools/standin-wheel.sh")
# The model directory the server serves (the stand-in reads only its config.json), and Ansible's
# remote_tmp as a provisioned host has it: made by Ansible's first run, it comes with a warning
# ("Module remote_tmp ... did not exist") that a demo would print every time on fresh hosts.
for h in "$@"; do
  docker exec "$h" mkdir -p /opt/inferops-wheelhouse /srv/models/standin
  docker exec "$h" install -d -m 0700 /root/.ansible /root/.ansible/tmp
  docker cp -q "$wheel" "$h:/opt/inferops-wheelhouse/"
  docker exec "$h" sh -c 'echo "{\"architectures\": [\"StandinForCausalLM\"]}" > /srv/models/standin/config.json'
done

#!/usr/bin/env bash
# Makes sure Debian's docker engine is installed and answering; starts dockerd by hand where no
# systemd runs it (CI and these machines start no services).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v dockerd >/dev/null || "$here/apt-install.sh" docker.io
docker info >/dev/null 2>&1 && exit 0

if [ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ]; then
  systemctl start docker
else
  echo "starting dockerd (log: /var/log/inferops-dockerd.log)" >&2
  setsid dockerd >>/var/log/inferops-dockerd.log 2>&1 </dev/null &
fi
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "docker engine did not answer within 30 s; see /var/log/inferops-dockerd.log" >&2
exit 1

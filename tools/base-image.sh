#!/usr/bin/env bash
# Builds the systemd base image for the container test hosts with debootstrap + docker import
# (no image registry is reachable). The tag carries a hash of this recipe, so the image is
# rebuilt only when the recipe changes. Prints the tag.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=${BASE_IMAGE_SUITE:-bookworm}
# The mirror this host's apt already uses (corporate mirrors included), unless one is given.
host_mirror() {
  grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian/?' | head -n1 || true
}
mirror=${DEBIAN_MIRROR:-$(host_mirror)}
[ -n "$mirror" ] || { echo "no Debian mirror found in apt sources: set DEBIAN_MIRROR" >&2; exit 1; }
# logrotate: every serving host of the scenarios wants it (sglang_server), and an apt-get update
# for it on each was a CPU cost of every run; the sglang_server scenario removes it again in its
# prepare, so the role's install path stays proven there.
packages=systemd,systemd-sysv,dbus,python3,python3-venv,python3-apt,ca-certificates,curl,iproute2,procps,gnupg,logrotate
ca_bundle=${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
recipe_hash=$( { cat "$0"; echo "$suite $packages"; cat "$ca_bundle" 2>/dev/null; } | sha256sum | cut -c1-12)
tag="inferops-gpu/base:${suite}-${recipe_hash}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

command -v debootstrap >/dev/null || "$here/apt-install.sh" debootstrap >&2
work=$(mktemp -d /var/tmp/inferops-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "building $tag from $mirror (debootstrap, a few minutes)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

root="$work/rootfs"
# A container has no consoles, udev or kernel modules: units that wait on them only slow boot.
for unit in getty@tty1.service serial-getty@.service systemd-udevd.service systemd-udev-trigger.service \
            systemd-modules-load.service systemd-remount-fs.service sys-kernel-config.mount \
            systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer e2scrub_reap.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
ln -sf /lib/systemd/system/multi-user.target "$root/etc/systemd/system/default.target"
: >"$root/etc/machine-id"
# Outbound TLS may be intercepted: the host's trusted CAs join the image's store the Debian way,
# so they survive any later update-ca-certificates inside a test host.
if [ -s "$ca_bundle" ]; then
  cp "$ca_bundle" "$root/usr/local/share/ca-certificates/inferops-host-bundle.crt"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb

tar -C "$root" -c . | docker import \
  --change 'ENV container=docker' \
  --change 'CMD ["/lib/systemd/systemd"]' \
  - "$tag" >&2
echo "$tag"

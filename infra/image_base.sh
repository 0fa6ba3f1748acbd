#!/usr/bin/env bash
# The base image of the Dockerfile without a registry: a minimal Debian bookworm root made with debootstrap,
# imported into podman. Installs podman, runc and debootstrap with apt-get when missing; idempotent.
set -euo pipefail
base=${1:-localhost/pricestream-base:bookworm}
podman_cmd=(podman --runtime /usr/sbin/runc)

need=()
for tool in podman debootstrap; do command -v "$tool" >/dev/null 2>&1 || need+=("$tool"); done
[[ -x /usr/sbin/runc ]] || need+=(runc)
if ((${#need[@]})); then
  echo "installing ${need[*]} with apt-get" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# no engine-wide ulimits: the sandbox refuses podman's defaults
conf=/etc/containers/containers.conf
if ! grep -q '^default_ulimits' "$conf" 2>/dev/null; then
  mkdir -p /etc/containers && printf '[containers]\ndefault_ulimits = []\n' >> "$conf"
fi
if "${podman_cmd[@]}" image exists "$base"; then
  echo "base image $base is present" >&2
  exit 0
fi
root=$(mktemp -d /tmp/pricestream-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
tar -C "$root" -c . | "${podman_cmd[@]}" import - "$base" >&2
echo "base image $base imported" >&2

#!/usr/bin/env bash
# Install the system programs the local stack needs, when missing: redis-server
# (apt-get), and check for Java 17+ and Maven with one clear message each.
set -euo pipefail

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# the dashboard tests render pages in a real headless browser
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# bench/serve.py loads the HTTP servers with wrk (a C load generator: it leaves the cores to the servers)
command -v wrk >/dev/null 2>&1 || need_apt+=(wrk)
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)

if ((${#need_apt[@]})); then
  if [[ $(id -u) -ne 0 ]] && ! command -v sudo >/dev/null 2>&1; then
    echo "pricestream needs: ${need_apt[*]} (install them with apt-get as root)" >&2
    exit 1
  fi
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "installing ${need_apt[*]} with apt-get" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [[ -z "$java_major" || "$java_major" -lt 17 ]]; then
  echo "pricestream needs Java 17 or newer on PATH (found: ${java_major:-none}); apt-get install openjdk-17-jre-headless" >&2
  exit 1
fi

#!/usr/bin/env bash
# Installs the Debian 12 packages dayshard needs to build and test, only those missing.
# Safe to run again; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git clang clang-format
  librdkafka-dev liburing-dev libzstd-dev libcmocka-dev libmicrohttpd-dev
  libjansson-dev zstd kcat python3-kafka python3-lz4 gnuplot-nox
  libcurl4-openssl-dev curl wrk postgresql
  libclang-rt-14-dev python3-yaml binutils systemd prometheus
  chromium chromium-driver python3-selenium
)
# chromium, chromium-driver, python3-selenium: the console's browser tests
# (tests/integration/test_console*.sh, console_browser.py; headless, no display needed).
# prometheus: its promtool checks deploy/prometheus's rules (tests/integration/test_deploy_rules.sh).
# python3-yaml, binutils (objdump), systemd (systemd-analyze): scripts/check-deploy.sh.
# libclang-rt-14-dev: clang's libFuzzer and sanitizer runtimes (the fuzz targets, the TSan run).

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) != 0 ]]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# Installs what tests/browser/run.sh needs: Debian's chromium and chromium-driver
# (/usr/bin/chromium, /usr/bin/chromedriver), and node (any version with a global fetch,
# 18 or later). Does nothing when they are already there. Needs root (CI runs as root).
set -euo pipefail
packages=()
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
command -v chromedriver >/dev/null 2>&1 || packages+=(chromium-driver)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
if [ ${#packages[@]} -eq 0 ]; then
  echo "browser test tools present: $(chromium --version 2>/dev/null | head -1), node $(node --version)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${packages[@]}"

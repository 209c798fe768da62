#!/usr/bin/env bash
# D2 decoder distillation on one GPU (recipes/train/README.md "Decoder distillation D2"): pairs once, four students in parallel;
# each student's decoder-side weights (fp16) to $OUT/<name>.safetensors, logs to $OUT/logs.tgz
cd "$(dirname "$0")/../.."
[ -d /tmp/site-serve ] || tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site-serve
MIN=${MIN:-6.3}; STEPS=${STEPS:-6000}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/gpu.txt; date -u | tee -a $OUT/gpu.txt
python3 -m rtvox train distill-decoder --teacher models/rtvox-small --texts .gpu/distill_texts.txt --out /tmp/s_pairs \
  --run-dir /tmp/drun --steps 1 --batch-frames 8000 --keep 0,1,2,3 --kernel 5 --feature-weight 0 --device cuda 2>&1 | grep -v Warn | tail -3
date -u | tee -a $OUT/gpu.txt
run() {  # name keep kernel lr fw
  mkdir -p /tmp/r_$1; rm -f /tmp/r_$1/state.pt /tmp/r_$1/log.jsonl; ln -sf /tmp/drun/pairs.pt /tmp/r_$1/pairs.pt
  timeout 460 python3 -m rtvox train distill-decoder --teacher models/rtvox-small --texts .gpu/distill_texts.txt \
    --out /tmp/s_$1 --run-dir /tmp/r_$1 --keep $2 --kernel $3 --no-postnet --steps $STEPS --batch-frames 8000 --lr $4 \
    --feature-weight $5 --version 8.10.0 --minutes $MIN --device cuda > /tmp/r_$1/out.log 2>&1
  python3 - $1 <<'PY'
import sys, os
from pathlib import Path
from safetensors.torch import save_file
from rtvox.models.bundle import load_weights
import torch
n = sys.argv[1]
w = load_weights(Path(f"/tmp/s_{n}"), "acoustic", torch.device("cpu"), torch.float16)
save_file({k: v.contiguous() for k, v in w.items() if k.startswith(("decoder.", "mel_out.", "frame_pos.", "postnet."))}, os.environ["OUT"] + f"/{n}.safetensors")
PY
}
run A 0,1,2,3 3 1e-4 1 &
run B 0,1,3 3 2e-4 1 &
run C 0,1,2,3 1 2e-4 1 &
run D 0,1,2,3 3 3e-4 1 &
wait
for n in A B C D; do echo "== $n"; grep -E "init|refit|resumed|stopping|wrote" /tmp/r_$n/out.log; grep -E "step [0-9]+ loss" /tmp/r_$n/out.log | tail -1; tail -3 /tmp/r_$n/log.jsonl; done
tar czf $OUT/logs.tgz -C /tmp r_A/out.log r_A/log.jsonl r_B/out.log r_B/log.jsonl r_C/out.log r_C/log.jsonl r_D/out.log r_D/log.jsonl
date -u | tee -a $OUT/gpu.txt

#!/usr/bin/env bash
# D3 on one GPU (recipes/train/README.md "Decoder distillation D3"): a student (decoder weights, default A2's in .gpu/)
# trained on pairs of 4 800 texts, a share of them (SHARE) spoken with the embedding of a clip of a random new voice
# (.gpu/dv.npy: the GE2E embeddings of recipes/train/distill_voices.py's clips), emotions as MIX (even: D2's;
# emotion: angry-weighted); decoder-side weights (fp16) to $OUT/decoder-$NAME.safetensors, log to $OUT/$NAME.log
cd "$(dirname "$0")/../.."
[ -d /tmp/site-serve ] || tar xJf .gpu/site-serve.tar.xz -C /tmp
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$PWD:/tmp/site-serve
NAME=${NAME:-A3}; STUDENT=${STUDENT:-.gpu/decoder-A2.safetensors}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/gpu-$NAME.txt; date -u | tee -a $OUT/gpu-$NAME.txt
timeout ${LIMIT:-540} python3 -m recipes.train.distill_finetune --teacher models/rtvox-small \
  --student $STUDENT --texts .gpu/distill_texts.txt --first 0 --count 4800 --mix ${MIX:-even} \
  --clips .gpu/dv.npy --clip-share ${SHARE:-0.5} --steps ${STEPS:-3000} --lr ${LR:-5e-5} --batch-frames 8000 --valid 300 \
  --device cuda --minutes ${MIN:-5} --version 8.10.0 --out /tmp/s_$NAME 2>&1 | grep -v Warn > $OUT/$NAME.log
grep -E "before|after" $OUT/$NAME.log; date -u | tee -a $OUT/gpu-$NAME.txt
python3 - $NAME <<'PY'
import os
import sys
from pathlib import Path
import torch
from safetensors.torch import save_file
from rtvox.models.bundle import load_weights
name = sys.argv[1]
w = load_weights(Path(f"/tmp/s_{name}"), "acoustic", torch.device("cpu"), torch.float16)
keep = ("decoder.", "mel_out.", "frame_pos.", "postnet.")
save_file({k: v.contiguous() for k, v in w.items() if k.startswith(keep)}, os.environ["OUT"] + f"/decoder-{name}.safetensors")
PY

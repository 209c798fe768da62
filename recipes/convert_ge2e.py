"""Convert resemblyzer's pretrained GE2E checkpoint into rtvox's shipped speaker encoder (models/ge2e).

    python recipes/convert_ge2e.py                        # fp16 weights from the installed resemblyzer
    python recipes/convert_ge2e.py --dtype fp32 --measure tests/data/speech_en_male_16k.wav

Reads `resemblyzer/pretrained.pt` (found through the installed package unless --checkpoint is given), keeps
the LSTM and projection weights (drops the GE2E loss's similarity scale/bias and the optimizer state), and
writes `speaker_encoder.safetensors` + `config.json`. With --measure CLIP it embeds that clip with the
converted weights (loaded back from disk, fp32 compute) and with resemblyzer itself, and prints the largest
absolute difference between the two embeddings: the number quoted in models/ge2e/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from rtvox.audio.decode import load_audio
from rtvox.models.speaker import CONFIG_NAME, WEIGHTS_NAME, SpeakerEncoder, SpeakerEncoderConfig

DTYPES = {"fp16": torch.float16, "fp32": torch.float32}
# Checkpoint entries that belong to training, not to the encoder.
TRAINING_ONLY = ("similarity_weight", "similarity_bias")


def resemblyzer_checkpoint() -> Path:
    spec = importlib.util.find_spec("resemblyzer")
    if spec is None or spec.origin is None:
        raise SystemExit("resemblyzer is not installed: `pip install resemblyzer` or pass --checkpoint")
    return Path(spec.origin).parent / "pretrained.pt"


def convert(checkpoint: Path, out_dir: Path, dtype: torch.dtype) -> None:
    data = torch.load(checkpoint, map_location="cpu", weights_only=True)
    weights = {name: t for name, t in data["model_state"].items() if name not in TRAINING_ONLY}
    config = SpeakerEncoderConfig()
    # strict=True proves the names and shapes match our module before anything is written.
    SpeakerEncoder(config).load_state_dict(weights, strict=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.to(dtype).contiguous() for name, t in weights.items()}
    metadata = {"source": "resemblyzer pretrained.pt", "training_step": str(data.get("step", "unknown"))}
    save_file(tensors, out_dir / WEIGHTS_NAME, metadata=metadata)
    (out_dir / CONFIG_NAME).write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")
    n_params = sum(t.numel() for t in tensors.values())
    size = (out_dir / WEIGHTS_NAME).stat().st_size
    print(f"wrote {out_dir / WEIGHTS_NAME} ({n_params:,} parameters, {dtype}, {size / 1e6:.2f} MB)")


def measure(out_dir: Path, clip: Path) -> float:
    """Max |ours - resemblyzer| over the embedding of `clip`, both fed resemblyzer's preprocessed wav."""
    from resemblyzer import VoiceEncoder, preprocess_wav

    wav = preprocess_wav(load_audio(clip, SpeakerEncoderConfig().sample_rate))
    theirs = VoiceEncoder(device="cpu", verbose=False).embed_utterance(wav)
    ours = SpeakerEncoder.load(out_dir).embed_utterance(wav)
    return float(np.max(np.abs(ours - theirs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="resemblyzer pretrained.pt")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "models" / "ge2e")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    parser.add_argument("--measure", type=Path, default=None, help="speech clip to check parity on")
    args = parser.parse_args()
    convert(args.checkpoint or resemblyzer_checkpoint(), args.out, DTYPES[args.dtype])
    if args.measure is not None:
        print(f"max |embedding - resemblyzer| on {args.measure}: {measure(args.out, args.measure):.2e}")


if __name__ == "__main__":
    main()

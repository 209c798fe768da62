"""How much intelligibility an AR model's mel codec keeps: Whisper on the same mels vocoded directly and after a
codec round trip (mel → codes → mel), both through the AR model's own vocoder.

The mels come from the default model's audio (rtvox-small renders each sentence, its mel is taken again), so the
only difference between the two columns is the codec. Run it before spending GPU time on the GPT: the GPT can at
best reach the round trip's figure. A phoneme-pointer codec (rtvox.models.codec) reads the phonemes along the
pointer track that the default model's own durations give (each chunk's end silence goes to its last phoneme).

    .venv/bin/python -m recipes.train.codec_roundtrip --ar-model /work/rtvox-ar \
        --sentences ../shared/eval/sentences_en.txt --limit 8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from rtvox.audio.mel import MelSpectrogram
from rtvox.constants import HOP_LENGTH, SAMPLE_RATE
from rtvox.eval.asr import WhisperJudge
from rtvox.eval.intelligibility import ASR_LANGUAGE
from rtvox.eval.metrics import ErrorCounts, primary_metric, score
from rtvox.models.ar_bundle import ARBundle, load_bundle
from rtvox.models.codec import pointers_from_durations
from rtvox.runtime import Synthesizer
from rtvox.runtime.types import SynthesisRequest
from rtvox.text.vocab import Vocabulary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ar-model", type=Path, required=True, help="an exported AR model directory")
    parser.add_argument("--model", default="rtvox-small", help="the model whose audio provides the mels")
    parser.add_argument("--sentences", type=Path, required=True, help="one sentence per line")
    parser.add_argument("--lang", default="en", choices=("en", "zh", "mixed"))
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--voice", default=None)
    args = parser.parse_args()

    synth = Synthesizer(args.model, device="cpu")
    bundle = load_bundle(args.ar_model, device=torch.device("cpu"), dtype=torch.float32)
    if not isinstance(bundle, ARBundle):
        raise SystemExit(f"{args.ar_model} is not an AR model directory (config family must be 'ar')")
    mel_of = MelSpectrogram()
    asr = WhisperJudge()
    metric = primary_metric(args.lang)
    downsample = bundle.config.codec.downsample
    skip = set(bundle.config.skip_symbols)
    vocab = Vocabulary.from_dict(bundle.vocab)
    lines = [t.strip() for t in args.sentences.read_text("utf-8").splitlines() if t.strip()][: args.limit]
    totals = {"direct": ErrorCounts(), "codec": ErrorCounts()}
    roundtrip_l1 = []
    for text in lines:
        request = SynthesisRequest(text=text, voice=args.voice)
        result = synth.synthesize(text, voice=args.voice)
        audio = result.audio
        mel = mel_of(torch.from_numpy(np.asarray(audio, dtype=np.float32))[None])
        mel = mel[:, :, : mel.shape[2] // downsample * downsample]
        speaker = synth.prepare(request).cond[:, : bundle.codec.config.speaker_dim].float()
        text_in: dict[str, torch.Tensor] = {}
        if bundle.codec.config.pointer:
            ids, durations = [], []
            for chunk in result.chunks:  # each chunk's end silence goes to its last phoneme
                kept = [(ph, d) for ph, d in zip(chunk.phonemes, chunk.durations, strict=True) if ph not in skip]
                if not kept:
                    continue
                ids += [vocab.id(ph) for ph, _ in kept]
                durations += [d for _, d in kept]
                durations[-1] += max(0, round(len(chunk.audio) / HOP_LENGTH) - sum(d for _, d in kept))
            durations[-1] += max(0, mel.shape[2] - sum(durations))
            config = bundle.codec.config
            track = pointers_from_durations(durations, mel.shape[2] // downsample, downsample, config.advances)
            text_in = {"phonemes": torch.tensor([ids]), "pointers": torch.tensor([track])}
        with torch.no_grad():
            rebuilt = bundle.codec.decode(bundle.codec.encode(mel), speaker, **text_in)
            clips = {"direct": bundle.vocoder(mel)[0].numpy(), "codec": bundle.vocoder(rebuilt)[0].numpy()}
        roundtrip_l1.append(float((rebuilt - mel).abs().mean()))
        for name, clip in clips.items():
            heard = asr.transcribe(clip, SAMPLE_RATE, language=ASR_LANGUAGE[args.lang]).text
            totals[name] = totals[name] + score(text, heard, args.lang)[metric]
            print(f"{name:6s} | {heard}", flush=True)
    report = {
        "ar_model": str(args.ar_model),
        "mels_from": str(synth.model_dir),
        "sentences": len(lines),
        "metric": metric,
        "direct": round(totals["direct"].rate, 4),
        "codec_roundtrip": round(totals["codec"].rate, 4),
        "roundtrip_mel_l1": round(float(np.mean(roundtrip_l1)), 4),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

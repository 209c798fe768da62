"""Pack a tiny corpus, train every trainer for a couple of steps on the CPU, export, and speak with the result.

Not a quality test (two steps learn nothing): it pins the data path end to end — manifest → packed shards →
batches → losses → snapshots → resumable state → model directory → Synthesizer.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from rtvox.constants import SAMPLE_RATE

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = [
    ("zh", "今天天气很好。", "zh_f_a"),
    ("en", "The quick brown fox jumps.", "en_m_b"),
    ("mixed", "我用iPhone打电话。", "zh_f_a"),
    ("en", "Numbers like forty two are read out.", "en_m_b"),
]


def _tone(seconds: float, f0: float, seed: int) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    rng = np.random.default_rng(seed)
    wav = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6)) * 0.1
    wav = wav * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) + rng.normal(0, 0.003, t.shape)
    silence = np.zeros(int(0.2 * SAMPLE_RATE))
    return np.concatenate([silence, wav, silence]).astype(np.float32)


def _write_corpus(corpus: Path, sentences: list[tuple[str, str, str]], held: bool) -> None:
    rows = []
    for i, (lang, text, speaker) in enumerate(sentences):
        path = Path("wavs") / f"{i}.wav"
        (corpus / "wavs").mkdir(exist_ok=True)
        sf.write(corpus / path, _tone(1.5 + 0.3 * i, 120 + 20 * i, i), SAMPLE_RATE)
        emotion = ["neutral", "happy", "sad", "angry"][i % 4]
        rows.append(
            dict(id=f"u{i}", path=str(path), text=text, spoken=text, lang=lang, speaker=speaker, emotion=emotion)
            | dict(split="train", duration_s=1.9 + 0.3 * i)
        )
    if held:
        rows.append(rows[0] | {"id": "held", "split": "val"})
    (corpus / "manifest.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")


def _pack(corpora: list[Path], out: Path) -> None:
    cmd = [sys.executable, "-m", "recipes.train.pack", *map(str, corpora), str(out), "--jobs", "1", "--shards", "2"]
    subprocess.run([*cmd, "--vocoder-minutes", "0.05"], check=True, cwd=ROOT, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    _write_corpus(root, SENTENCES * 2, held=True)
    return root


@pytest.fixture(scope="module")
def packed(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("packed")
    _pack([corpus], out)
    return out


def test_pack_round_trip(packed: Path) -> None:
    from rtvox.training.data import collate_acoustic, load_acoustic, load_vocoder_audio

    info = json.loads((packed / "pack.json").read_text("utf-8"))
    assert info["heldout_ids"] == ["held"] and info["skipped"] == 0
    data = load_acoustic(packed)
    assert len(data) == 8 and sorted(set(data.utt)) == sorted(f"u{i}" for i in range(8))
    lengths = data.mel_lengths
    assert (lengths > 100).all()  # trimmed of silence, still ~1.5 s or more
    batch = collate_acoustic(data, np.arange(3), __import__("torch").device("cpu"))
    assert batch["mel"].shape[1] == 80 and batch["mel"].min() >= -11.7 and batch["voiced"].any()
    for row in range(3):
        f0 = batch["log_f0"][row][batch["voiced"][row]].exp()
        expected = 120 + 20 * int(data.utt[row][1:])  # each clip is a harmonic tone at its own pitch
        assert float(f0.median()) == pytest.approx(expected, rel=0.03)
    assert len(load_vocoder_audio(packed)) >= 2


def test_pack_merges_several_corpora(corpus: Path, tmp_path: Path) -> None:
    from rtvox.training.data import load_acoustic

    second = tmp_path / "second"
    second.mkdir()
    _write_corpus(second, [("en", "Another voice reads this.", "en_f_c"), ("zh", "明天见。", "zh_f_a")], held=False)
    out = tmp_path / "packed"
    _pack([corpus, second], out)
    info = json.loads((out / "pack.json").read_text("utf-8"))
    assert info["speakers"] == ["en_f_c", "en_m_b", "zh_f_a"]  # merged by name, one table
    assert info["heldout_ids"] == [f"{corpus.name}/held"]
    data = load_acoustic(out)
    assert sorted(data.utt) == sorted([f"{corpus.name}/u{i}" for i in range(8)] + ["second/u0", "second/u1"])
    row = data.utt.index("second/u0")
    assert info["speakers"][int(data.speaker[row])] == "en_f_c"


def test_pack_rejects_corpora_with_the_same_name(corpus: Path, tmp_path: Path) -> None:
    twin = tmp_path / corpus.name
    twin.mkdir()
    _write_corpus(twin, SENTENCES[:1], held=False)
    cmd = [sys.executable, "-m", "recipes.train.pack", str(corpus), str(twin), str(tmp_path / "out")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "distinct names" in done.stderr


def test_train_resume_export_and_speak(packed: Path, tmp_path: Path) -> None:
    import torch

    from rtvox.errors import InputError
    from rtvox.runtime.synthesizer import Synthesizer
    from rtvox.training.acoustic import AcousticRun, train_acoustic
    from rtvox.training.export import export_bundle
    from rtvox.training.vocoder import VocoderRun, train_vocoder

    run = AcousticRun(packed, tmp_path / "ac", preset="tiny", device="cpu", max_steps=2, batch_frames=2000)
    assert train_acoustic(run)["step"] == 2
    run.max_steps = 3  # resumes from state.pt, not from step 0
    assert train_acoustic(run)["step"] == 3
    progress = json.loads((tmp_path / "ac" / "snapshot" / "progress.json").read_text("utf-8"))
    assert progress["speaker_ref"] == "neutral"  # the default: rows conditioned on another neutral clip
    voc = VocoderRun(packed, tmp_path / "voc", preset="vocos-tiny", device="cpu", max_steps=2, batch=2)
    assert train_vocoder(voc)["step"] == 2
    voices = tmp_path / "voices.json"
    spec = {"voices": [{"name": "a", "speaker": "zh_f_a", "gender": "female", "language": "zh,en"}]}
    voices.write_text(json.dumps(spec), "utf-8")
    bundle = export_bundle(tmp_path / "ac" / "snapshot", tmp_path / "voc" / "snapshot", packed, voices, tmp_path / "m")
    assert bundle.config.vocoder.family == "vocos" and list(bundle.voices) == ["a"]
    assert bundle.config.skip_symbols == ("#1", "#2")  # the trainer's default travels with the weights
    synth = Synthesizer(tmp_path / "m", voices_dir=tmp_path / "clones")
    result = synth.synthesize("你好，world。")
    assert result.audio.size > 0 and np.isfinite(result.audio).all()
    for chunk in result.chunks:  # word boundaries take no time; every phoneme keeps a duration slot
        assert len(chunk.durations) == len(chunk.phonemes)
        assert all(d == 0 for p, d in zip(chunk.phonemes, chunk.durations, strict=True) if p in ("#1", "#2"))
        assert sum(chunk.durations) * 256 == chunk.audio.size
    # a new acoustic model can keep a shipped model's vocoder: the model directory stands in for the snapshot
    again = export_bundle(tmp_path / "ac" / "snapshot", tmp_path / "m", packed, voices, tmp_path / "m2", prior=False)
    assert again.config.vocoder == bundle.config.vocoder
    # without the prior step the config carries no prior and no pitch bound (the learned conditioning alone)
    assert bundle.config.emotion_prosody.source["data"] == str(packed)
    assert again.config.emotion_prosody.source == {} and again.config.emotion_prosody.shifts == {}
    assert again.acoustic.variance.pitch_bounds is None
    for (key, mine), theirs in zip(
        again.vocoder.state_dict().items(), bundle.vocoder.state_dict().values(), strict=True
    ):
        assert torch.equal(mine, theirs), key
    with pytest.raises(InputError, match="neither a vocoder snapshot"):
        export_bundle(tmp_path / "ac" / "snapshot", tmp_path / "voices.json", packed, voices, tmp_path / "m3")
    # a re-export can keep a shipped model's voice table as it is, instead of re-deriving it from the corpus
    from rtvox.models.bundle import ModelBundle

    shipped = ModelBundle.load(tmp_path / "m")
    shipped.voices["a"] = torch.nn.functional.normalize(torch.randn(shipped.voices["a"].numel()), dim=0)
    shipped.voices_meta[0]["description"] = "kept"
    shipped.save(tmp_path / "m4")
    kept = export_bundle(tmp_path / "ac" / "snapshot", tmp_path / "m", packed, tmp_path / "m4", tmp_path / "m5")
    assert list(kept.voices) == ["a"] and kept.voices_meta[0]["description"] == "kept"
    assert kept.config.default_voice == "a"
    torch.testing.assert_close(kept.voices["a"].float(), shipped.voices["a"].half().float(), rtol=0, atol=0)
    assert not torch.allclose(kept.voices["a"].float(), bundle.voices["a"].float(), atol=1e-2)
    with pytest.raises(InputError, match="neither a voices JSON file nor a model directory"):
        export_bundle(tmp_path / "ac" / "snapshot", tmp_path / "m", packed, tmp_path / "nowhere", tmp_path / "m6")


def test_dropout_override_reaches_the_acoustic_model(packed: Path, tmp_path: Path) -> None:
    import torch

    from rtvox.training.acoustic import AcousticRun, build_modules, run_config

    def rates(run: AcousticRun) -> set[float]:
        model = build_modules(run_config(run, 400), 400)["acoustic"]
        return {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}

    preset = AcousticRun(packed, tmp_path / "a", preset="small", device="cpu")
    assert rates(preset) == {0.05}
    assert rates(AcousticRun(packed, tmp_path / "b", preset="small", device="cpu", dropout=0.15)) == {0.15}


def test_train_cli_refuses_a_dropout_outside_0_1(packed: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rtvox.cli import app

    args = ["train", "acoustic", "--data", str(packed), "--run-dir", str(tmp_path / "r"), "--device", "cpu"]
    result = CliRunner().invoke(app, [*args, "--dropout", "1.5", "--max-steps", "1"])
    assert result.exit_code != 0 and "--dropout" in result.output
    assert not (tmp_path / "r").exists()  # refused before anything was written
    result = CliRunner().invoke(app, [*args, "--speaker-ref", "mine", "--max-steps", "1"])
    assert result.exit_code == 2 and "--speaker-ref" in result.output and "neutral" in result.output
    assert not (tmp_path / "r").exists()
    result = CliRunner().invoke(app, [*args, "--train-only", "decoder", "--max-steps", "1"])
    assert result.exit_code == 2 and "--train-only" in result.output and "emotion" in result.output
    result = CliRunner().invoke(app, [*args, "--train-only", "emotion", "--aligner-only-steps", "5"])
    assert result.exit_code == 2 and "aligner" in result.output
    assert not (tmp_path / "r").exists()


def test_vocoder_starts_from_a_snapshot_without_its_discriminator(packed: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from rtvox.models.bundle import ModelError
    from rtvox.training.checkpoint import load_snapshot
    from rtvox.training.vocoder import Discriminators, VocoderRun, train_vocoder

    first = VocoderRun(packed, tmp_path / "a", preset="vocos-tiny", device="cpu", max_steps=1, batch=2)
    train_vocoder(first)
    snap = tmp_path / "a" / "snapshot"
    (snap / "discriminator.safetensors").unlink()  # what gpu.sh ships back
    with pytest.raises(ModelError, match="discriminator"):  # strict by default
        load_snapshot(snap, {"discriminator": Discriminators()})
    second = VocoderRun(packed, tmp_path / "b", preset="vocos-tiny", device="cpu", max_steps=2, batch=2, init=snap)
    assert train_vocoder(second)["step"] == 2  # continues the step count from the snapshot's progress
    before, after = (
        load_file(snap / "vocoder.safetensors"),
        load_file(tmp_path / "b" / "snapshot" / "vocoder.safetensors"),
    )
    assert before.keys() == after.keys() and any(not before[k].equal(after[k]) for k in before)


def test_drop_ids_removes_symbols_and_keeps_utterances_aligned(packed: Path) -> None:
    from rtvox.text.vocab import Vocabulary
    from rtvox.training.data import drop_ids, load_acoustic

    vocab = Vocabulary.default()
    data = load_acoustic(packed)
    word = vocab.id("#1")
    assert (data.ids == word).any()
    dropped = drop_ids(data, {word})
    assert not (dropped.ids == word).any() and len(dropped) == len(data)
    for u in range(len(data)):
        before = data.ids[data.ph_off[u] : data.ph_off[u + 1]]
        after = dropped.ids[dropped.ph_off[u] : dropped.ph_off[u + 1]]
        assert after.tolist() == [i for i in before.tolist() if i != word]
    assert drop_ids(data, set()) is data


def test_held_out_sentences_keep_every_rendering_of_a_sentence_out_of_training(packed: Path) -> None:
    from rtvox.training.ar import held_out_sentences
    from rtvox.training.data import load_acoustic

    data = load_acoustic(packed)
    splits = [held_out_sentences(data, share=share) for share in (0.25, 0.5, 0.75)]  # 4 sentences: some split
    train, val = next((t, v) for t, v in splits if len(t) and len(v))
    assert sorted([*train, *val]) == list(range(len(data)))

    def text(u: int) -> bytes:
        return data.ids[data.ph_off[u] : data.ph_off[u + 1]].tobytes()

    assert not {text(u) for u in train} & {text(u) for u in val}  # no sentence on both sides
    share = (0.25, 0.5, 0.75)[[len(v) for _, v in splits].index(len(val))]
    again_train, again_val = held_out_sentences(data, share=share)
    assert (again_train == train).all() and (again_val == val).all()  # the same split every run
    assert len(held_out_sentences(data, share=0.0)[1]) == 0


def test_ar_family_trainers_run_resume_and_snapshot(packed: Path, tmp_path: Path) -> None:
    import torch

    from rtvox.models.ar import ARDecoder
    from rtvox.runtime.ar import ARDecodeEngine, ARRequest
    from rtvox.text.vocab import Vocabulary
    from rtvox.training.ar import SKIP_SYMBOLS, ARRun, held_out_sentences, train_ar, train_codec
    from rtvox.training.checkpoint import load_snapshot
    from rtvox.training.data import drop_ids, load_acoustic

    vocab = Vocabulary.default()  # the trainers' view of the data: word/phrase boundaries dropped
    data = drop_ids(load_acoustic(packed), {vocab.id(symbol) for symbol in SKIP_SYMBOLS})
    # a share that holds out some of the fixture's 4 sentences, not all
    share = next(s for s in (0.25, 0.5, 0.75) if all(len(part) for part in held_out_sentences(data, s)))
    kw = dict(preset="tiny", device="cpu", val_share=share)
    codec_run = ARRun(packed, tmp_path / "codec", max_steps=2, batch=2, segment=32, **kw)  # type: ignore[arg-type]
    codec_progress = train_codec(codec_run)
    assert codec_progress["step"] == 2 and codec_progress["val_mel_l1"] > 0  # held-out sentences scored
    ar_run = ARRun(packed, tmp_path / "ar", codec=tmp_path / "codec" / "snapshot", **kw)  # type: ignore[arg-type]
    ar_run.max_steps, ar_run.batch_frames = 2, 2000
    progress = train_ar(ar_run)
    assert progress["step"] == 2 and progress["n_codes"] == 32 and progress["speaker_ref"] == "neutral"
    assert progress["val_ce"] > 0 and 0 <= progress["val_accuracy"] <= 1 and progress["val_utterances"] >= 2
    ar_run.max_steps = 3
    assert train_ar(ar_run)["step"] == 3  # resumed from state.pt
    # the snapshot loads into a fresh decoder and decodes with an exact token count
    from rtvox.models.ar import ARConfig
    from rtvox.text.vocab import Vocabulary

    config = ARConfig.preset("tiny", text_vocab=len(Vocabulary.default()), n_codes=32, cond_dim=384)
    gpt = ARDecoder(config)
    load_snapshot(tmp_path / "ar" / "snapshot", {"ar": gpt})
    out = ARDecodeEngine(gpt, num_blocks=16, block_size=8).generate([ARRequest("a", [5, 6, 7], [0.0] * 384, 9)])
    assert len(out["a"]) == 9 and all(0 <= t < 32 for t in out["a"])
    assert torch.isfinite(next(gpt.parameters())).all()


@pytest.mark.parametrize("codec_preset", ["tiny", "pointer-tiny"])
def test_export_ar_builds_a_servable_model_directory(packed: Path, tmp_path: Path, codec_preset: str) -> None:
    """`rtvox train export-ar` from codec, GPT and vocoder snapshots (random weights: the trainers' own runs are
    pinned above) gives a directory the Synthesizer loads as the AR family and speaks with, with plain codes and
    with phoneme-pointer tokens."""
    from typer.testing import CliRunner

    from rtvox.cli import app
    from rtvox.models.ar import ARDecoder
    from rtvox.models.ar_bundle import ARBundle
    from rtvox.models.codec import CodecConfig, MelCodec
    from rtvox.models.emotion import EmotionConfig, EmotionTable
    from rtvox.models.vocoder import build_vocoder, vocoder_preset
    from rtvox.runtime.synthesizer import Synthesizer
    from rtvox.training.ar import ar_config
    from rtvox.training.checkpoint import save_snapshot

    codec_config = CodecConfig.preset(codec_preset)
    save_snapshot(tmp_path / "codec", {"codec": MelCodec(codec_config)}, {"preset": codec_preset, "kind": "codec"})
    gpt, table = ARDecoder(ar_config("tiny", codec_config)), EmotionTable(EmotionConfig())
    identity = {"preset": "tiny", "kind": "ar", "n_codes": codec_config.n_tokens}
    save_snapshot(tmp_path / "ar", {"ar": gpt, "emotion_table": table}, identity)
    save_snapshot(tmp_path / "voc", {"vocoder": build_vocoder(vocoder_preset("vocos-tiny"))}, {"preset": "vocos-tiny"})
    voices = tmp_path / "voices.json"
    spec = {"default": "b", "voices": [{"name": "a", "speaker": "zh_f_a"}, {"name": "b", "speaker": "en_m_b"}]}
    voices.write_text(json.dumps(spec), "utf-8")
    args = ["train", "export-ar", "--codec", str(tmp_path / "codec"), "--ar", str(tmp_path / "ar")]
    args += ["--vocoder", str(tmp_path / "voc"), "--data", str(packed), "--voices", str(voices)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "m"), "--name", "ar-test", "--version", "0.0.1"])
    assert result.exit_code == 0, result.output
    bundle = ARBundle.load(tmp_path / "m")
    assert (bundle.config.name, bundle.config.version, bundle.config.default_voice) == ("ar-test", "0.0.1", "b")
    assert bundle.config.skip_symbols == ("#1", "#2") and bundle.config.vocoder.family == "vocos"
    assert bundle.config.ar.advances == (4 if codec_preset.startswith("pointer") else 0)
    synth = Synthesizer(tmp_path / "m", device="cpu", voices_dir=tmp_path / "clones")
    audio = synth.synthesize("你好，world。", duration=1.0).audio
    assert audio.size == round(1.0 * SAMPLE_RATE / 256) * 256 and np.isfinite(audio).all()


def test_phoneme_pointer_trainers_take_the_aligner_durations(packed: Path, tmp_path: Path) -> None:
    """recipes/train/durations.py runs an acoustic snapshot's aligner over the corpus (durations that sum to every
    mel length); the pointer codec and the GPT train on them, and a GPT token carries the pointer's advance."""
    import torch
    from recipes.train import durations as durations_recipe

    from rtvox.errors import InputError
    from rtvox.models.codec import CodecConfig, split_tokens
    from rtvox.text.vocab import Vocabulary
    from rtvox.training.acoustic import AcousticRun, train_acoustic
    from rtvox.training.ar import (
        SKIP_SYMBOLS,
        ARRun,
        load_durations,
        pointer_batch,
        pointer_table,
        pointer_tokens,
        train_ar,
        train_codec,
    )
    from rtvox.training.data import drop_ids, load_acoustic

    acoustic = AcousticRun(packed, tmp_path / "ac", preset="tiny", device="cpu", max_steps=1, batch_frames=2000)
    train_acoustic(acoustic)
    out = tmp_path / "durations.npz"
    args = ["--data", str(packed), "--snapshot", str(tmp_path / "ac" / "snapshot"), "--out", str(out)]
    assert durations_recipe.main([*args, "--device", "cpu", "--batch", "3"]) == 0
    vocab = Vocabulary.default()
    data = drop_ids(load_acoustic(packed), {vocab.id(symbol) for symbol in SKIP_SYMBOLS})
    durations = load_durations(out, data)
    assert [int(d.sum()) for d in durations] == data.mel_lengths.tolist() and all((d >= 1).all() for d in durations)
    codec = CodecConfig.preset("pointer-tiny")
    table = pointer_table(durations, data, codec)
    for track, d, frames in zip(table, durations, data.mel_lengths, strict=True):
        assert len(track) == frames // codec.downsample and track[0] >= 0 and (np.diff(track) >= 0).all()
        assert (np.diff(track, prepend=0) < codec.advances).all() and track[-1] <= len(d) - 1
    rows = np.arange(2)
    pointers = pointer_batch(table, rows, 5, torch.device("cpu"))
    codes = torch.tensor([[3, 0, 7, 1, 2], [5, 5, 5, 5, 5]])
    tokens = pointer_tokens(codes, pointers, codec.advances)
    got_codes, steps = split_tokens(tokens, codec.advances)
    assert torch.equal(got_codes, codes) and torch.equal(steps.cumsum(1), pointers)
    kw = dict(device="cpu", val_share=0.25, durations=out)
    codec_run = ARRun(packed, tmp_path / "codec", preset="pointer-tiny", max_steps=2, batch_frames=2000, **kw)  # type: ignore[arg-type]
    assert train_codec(codec_run)["val_mel_l1"] > 0
    ar_run = ARRun(packed, tmp_path / "ar", preset="tiny", codec=tmp_path / "codec" / "snapshot", **kw)  # type: ignore[arg-type]
    ar_run.max_steps, ar_run.batch_frames = 2, 2000
    progress = train_ar(ar_run)
    assert progress["advances"] == 4 and progress["n_codes"] == codec.n_tokens
    ar_run.durations = None  # a pointer codec without durations is refused by name
    with pytest.raises(InputError, match="--durations"):
        train_ar(ARRun(packed, tmp_path / "ar2", preset="tiny", codec=tmp_path / "codec" / "snapshot", device="cpu"))
    bad = tmp_path / "bad.npz"
    with np.load(out) as z:
        np.savez(bad, utt=z["utt"], ph_len=z["ph_len"], dur=z["dur"] + 1)
    with pytest.raises(InputError, match="do not fit"):
        load_durations(bad, data)
    with pytest.raises(InputError, match="not a durations file"):
        load_durations(packed / "pack.json", data)
    with pytest.raises(InputError, match="unknown codec preset 'nope'"):
        train_codec(ARRun(packed, tmp_path / "codec2", preset="nope", device="cpu"))


def _gpu_train(src: Path, tmp_path: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`recipes/train/gpu.sh train SRC 0.01` on the CPU with `settings` (env), its state and output under tmp_path;
    asserts it exited 0."""
    import os

    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # python3 = this interpreter
        "DEVICE": "cpu",
        "DATA": str(tmp_path / "data"),
        "RUNS": str(tmp_path / "runs"),
        "OUT": str(tmp_path / "out"),
        "PACK": str(tmp_path / "pack"),
        **settings,
    }
    script = ROOT / "recipes" / "train" / "gpu.sh"
    done = subprocess.run(["bash", str(script), "train", str(src), "0.01"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def test_gpu_script_trains_side_by_side_and_ships_one_tar(packed: Path, tmp_path: Path) -> None:
    """recipes/train/gpu.sh on the CPU: four trainers at once, every snapshot back in one split tar, the
    vocoder's discriminator left behind (it would push the return over the 64 MiB a device call brings back)."""
    import shutil
    import tarfile

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    settings = {"ACOUSTIC_PRESET": "tiny", "VOC_PRESET": "vocos-tiny", "SECOND": "tiny", "CODEC": "1"}
    done = _gpu_train(packed, tmp_path, settings)
    for name in ("acoustic", "vocoder", "codec", "acoustic-tiny"):
        assert f"{name} exited" not in done.stdout, done.stdout[-2000:]
    pieces = sorted((tmp_path / "out").glob("snap.tar.*"))
    assert pieces and all(p.stat().st_size <= 15 * 2**20 for p in pieces)
    joined = tmp_path / "snap.tar"
    joined.write_bytes(b"".join(p.read_bytes() for p in pieces))
    with tarfile.open(joined) as tar:
        names = set(tar.getnames())
    for part in ("acoustic/progress.json", "vocoder/vocoder.safetensors", "codec/codec.safetensors"):
        assert f"pack/{part}" in names, sorted(names)
    assert "pack/acoustic-tiny/progress.json" in names
    assert not any(n.endswith("discriminator.safetensors") for n in names)
    progress = json.loads((tmp_path / "pack" / "acoustic-tiny" / "progress.json").read_text("utf-8"))
    assert progress["preset"] == "tiny" and progress["step"] >= 1


def _model_dir_from(snapshot: Path, out: Path) -> Path:
    """A shipped-model layout (config.json, acoustic*, emotion.safetensors with encoder./table. prefixes) made
    from a training snapshot, as `rtvox train export` lays the weights out."""
    from safetensors.torch import load_file, save_file

    out.mkdir()
    for path in snapshot.glob("acoustic*.safetensors"):
        shutil.copy(path, out / path.name)
    emotion = {f"encoder.{k}": v for k, v in load_file(snapshot / "emotion_encoder.safetensors").items()}
    emotion |= {f"table.{k}": v for k, v in load_file(snapshot / "emotion_table.safetensors").items()}
    save_file(emotion, out / "emotion.safetensors")
    (out / "config.json").write_text(json.dumps({"name": "warm", "version": "1.2.0"}), "utf-8")
    return out


def test_warm_start_from_a_model_directory_trains_the_aligner_first(packed: Path, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from rtvox.text.vocab import Vocabulary
    from rtvox.training.acoustic import AcousticRun, build_modules, run_config, train_acoustic

    def run(name: str, **kw: object) -> AcousticRun:
        return AcousticRun(packed, tmp_path / name, preset="tiny", device="cpu", batch_frames=2000, **kw)  # type: ignore[arg-type]

    train_acoustic(run("first", max_steps=2))
    model = _model_dir_from(tmp_path / "first" / "snapshot", tmp_path / "model")
    warm = run("warm", init=model, aligner_only_steps=2, max_steps=2)
    assert train_acoustic(warm)["init_model"] == "warm 1.2.0"
    snap = tmp_path / "warm" / "snapshot"
    shipped = load_file(model / "acoustic.safetensors")
    after = load_file(snap / "acoustic.safetensors")
    assert all(torch.equal(after[k], v) for k, v in shipped.items())  # aligner-only steps leave the model alone
    torch.manual_seed(warm.seed)  # the trainer's fresh aligner, built the same way
    n = len(Vocabulary.default())
    fresh = build_modules(run_config(warm, n), n)["aligner"].state_dict()
    trained = load_file(snap / "aligner.safetensors")
    assert any(not torch.equal(trained[k], v.half()) for k, v in fresh.items())  # ... while the aligner learns
    warm.max_steps = 3  # resumed past the aligner-only steps: now the acoustic model trains too
    assert train_acoustic(warm)["init_model"] == "warm 1.2.0"
    later = load_file(snap / "acoustic.safetensors")
    assert any(not torch.equal(later[k], v) for k, v in shipped.items())


def test_warm_start_refuses_a_model_of_another_size(packed: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rtvox.cli import app
    from rtvox.training.acoustic import AcousticRun, train_acoustic

    train_acoustic(AcousticRun(packed, tmp_path / "t", preset="tiny", device="cpu", batch_frames=2000, max_steps=1))
    model = _model_dir_from(tmp_path / "t" / "snapshot", tmp_path / "model")
    args = ["train", "acoustic", "--data", str(packed), "--run-dir", str(tmp_path / "s"), "--preset", "small"]
    done = CliRunner().invoke(app, [*args, "--init", str(model), "--device", "cpu", "--max-steps", "1"])
    assert done.exit_code == 1
    assert "does not fit acoustic" in done.output and "Traceback" not in done.output


def test_gta_pairs_line_up_with_the_recordings_and_fine_tune_the_vocoder(
    corpus: Path, packed: Path, tmp_path: Path
) -> None:
    """recipes/train/gta.py: the acoustic model's teacher-forced mel beside the clip's own trimmed audio, frame k
    over samples k·256…; `rtvox train vocoder --gta-fraction` trains on those pairs, with or without shards."""
    import torch

    from rtvox.audio.mel import MelSpectrogram
    from rtvox.errors import InputError
    from rtvox.training.acoustic import AcousticRun, train_acoustic
    from rtvox.training.data import dequantize_mel, load_acoustic
    from rtvox.training.gta import load_gta, random_gta_segments
    from rtvox.training.vocoder import VocoderRun, train_vocoder

    train_acoustic(AcousticRun(packed, tmp_path / "ac", preset="tiny", device="cpu", max_steps=1, batch_frames=2000))
    out = tmp_path / "g" / "gta-0.npz"
    snap = tmp_path / "ac" / "snapshot"
    cmd = [sys.executable, "-m", "recipes.train.gta", "--data", str(packed), "--snapshot", str(snap)]
    cmd += ["--corpus", str(corpus), "--shards", "acoustic-0.npz.xz", "--minutes", "10", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    data = load_acoustic(packed, ["acoustic-0.npz.xz"])
    clips = load_gta(tmp_path / "g")
    assert summary["clips"] == len(clips) == len(data) and sorted(c.utt for c in clips) == sorted(data.utt)
    mel_fn = MelSpectrogram()
    for clip in clips:
        i = data.utt.index(clip.utt)
        packed_mel = dequantize_mel(torch.from_numpy(data.mel[data.mel_off[i] : data.mel_off[i + 1]]), data.info).T
        assert clip.mel.shape == packed_mel.shape and clip.wav.shape == (clip.mel.shape[1] * 256,)
        heard = mel_fn(torch.from_numpy(clip.wav)[None])[0]
        aligned = (heard - packed_mel).abs().mean()
        shifted = (heard[:, 1:] - packed_mel[:, :-1]).abs().mean()
        assert aligned < 0.2 and aligned < shifted, (clip.utt, float(aligned), float(shifted))
    # segments: the mel columns and the samples they cover come from the same place of the same clip
    mel, wav = random_gta_segments(clips[:1], 3, 8, np.random.default_rng(5))
    replay = np.random.default_rng(5)
    for row in range(3):
        replay.integers(1)
        start = int(replay.integers(clips[0].mel.shape[1] - 8 + 1))
        np.testing.assert_array_equal(mel[row], clips[0].mel[:, start : start + 8])
        np.testing.assert_array_equal(wav[row], clips[0].wav[start * 256 : (start + 8) * 256])
    # the vocoder fine-tunes on the pairs alone (no vocoder shards beside them) and beside the shards
    run = VocoderRun(tmp_path / "g", tmp_path / "v1", preset="vocos-tiny", device="cpu", max_steps=2, batch=4)
    run.gta_fraction = 0.5
    assert train_vocoder(run)["step"] == 2
    for shard in packed.glob("vocoder-*.npz"):
        shutil.copy(shard, tmp_path / "g" / shard.name)
    run = VocoderRun(tmp_path / "g", tmp_path / "v2", preset="vocos-tiny", device="cpu", max_steps=1, batch=2)
    run.gta_fraction = 1.0
    assert train_vocoder(run)["step"] == 1
    with pytest.raises(InputError, match="gta"):
        train_vocoder(VocoderRun(packed, tmp_path / "v3", preset="vocos-tiny", device="cpu", gta_fraction=0.5))
    with pytest.raises(InputError, match=r"within 0\.\.1"):
        train_vocoder(VocoderRun(packed, tmp_path / "v4", preset="vocos-tiny", device="cpu", gta_fraction=1.5))


def test_gpu_script_fine_tunes_three_vocoder_variants_alone(packed: Path, tmp_path: Path) -> None:
    """`ACOUSTIC=0 VOC_ARGS=… VOC2_ARGS=… VOC3_ARGS=… gpu.sh train`: no acoustic model, three vocoders from one
    init snapshot, all back in the tar."""
    import tarfile

    import torch

    from rtvox.audio.mel import MelSpectrogram
    from rtvox.models.vocoder import build_vocoder, vocoder_preset
    from rtvox.training.checkpoint import save_snapshot
    from rtvox.training.gta import GtaClip, save_gta

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    src = tmp_path / "src"
    wav = _tone(1.0, 150, 3)[: 80 * 256]
    save_gta(src / "gta-0.npz", [GtaClip(MelSpectrogram()(torch.from_numpy(wav)[None])[0].numpy(), wav, "u")])
    init = build_vocoder(vocoder_preset("vocos-tiny"))
    save_snapshot(src / "init" / "vocoder", {"vocoder": init}, {"preset": "vocos-tiny", "step": 7})
    settings = {"ACOUSTIC": "0", "VOC_PRESET": "vocos-tiny", "VOC_BATCH": "2"}
    settings |= {"VOC_ARGS": "--gta-fraction 0.5 --lr 1e-4", "VOC2_ARGS": "--gta-fraction 1.0 --lr 1e-4"}
    done = _gpu_train(src, tmp_path, settings | {"VOC3_ARGS": "--gta-fraction 0"})
    assert "exited" not in done.stdout, done.stdout[-2000:]
    joined = tmp_path / "snap.tar"
    joined.write_bytes(b"".join(p.read_bytes() for p in sorted((tmp_path / "out").glob("snap.tar.*"))))
    with tarfile.open(joined) as tar:
        names = set(tar.getnames())
    variants = ("vocoder", "vocoder-b", "vocoder-c")
    assert {f"pack/{v}/vocoder.safetensors" for v in variants} <= names, sorted(names)
    assert not any(n.startswith("pack/acoustic") for n in names)
    for name in variants:  # each started from the init snapshot's step count
        assert json.loads((tmp_path / "pack" / name / "progress.json").read_text("utf-8"))["step"] > 7
    log = (tmp_path / "runs" / "vocoder-b.log").read_text("utf-8")
    assert "1 GTA pairs, 2 of 2 rows a batch" in log
    # the copy-synthesis control (fraction 0) trains on the GTA recordings when no vocoder shards are there
    assert "1 GTA pairs, 0 of 2 rows a batch" in (tmp_path / "runs" / "vocoder-c.log").read_text("utf-8")

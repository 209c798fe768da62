"""`rtvox eval` end to end on the tiny random model (Whisper base through faster-whisper, CPU int8).

Skipped cleanly where the eval extra is not installed; CI installs it (see Makefile / pyproject `dev`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from rtvox.cli import app
from rtvox.constants import SAMPLE_RATE
from rtvox.eval.asr import whisper_available

pytestmark = pytest.mark.skipif(not whisper_available(), reason="eval extra (faster-whisper + Whisper parts) missing")

EN = "The museum opens at nine."
ZH = "我们明天早上去公园散步。"


@pytest.fixture
def sentence_files(tmp_path: Path) -> dict[str, Path]:
    files = {"en": EN, "zh": ZH, "mixed": "我们下周去New York出差。"}
    out = {}
    for lang, text in files.items():
        path = tmp_path / f"sentences_{lang}.txt"
        path.write_text(f"# a comment line\n{text}\n\nsecond line is cut by --limit\n", encoding="utf-8")
        out[lang] = path
    return out


def buzz(seconds: float, f0: float) -> np.ndarray:
    """A voiced, speech-loud stand-in for a reference clip (GE2E only needs audio, not words)."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    vibrato = 1 + 0.05 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(f0 * vibrato) / SAMPLE_RATE
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    return (0.2 * envelope * sum(np.sin(k * phase) / k for k in range(1, 8))).astype(np.float32)


def ref_folder(tmp_path: Path, name: str, seconds: float) -> Path:
    """A folder holding one buzz clip of `seconds`."""
    refs = tmp_path / "refs"
    refs.mkdir()
    sf.write(refs / name, buzz(seconds, 140.0), SAMPLE_RATE)
    return refs


def test_eval_on_tiny_model_writes_well_formed_results(
    tiny_model: Path, sentence_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rtvox.eval import cloning
    from rtvox.eval.emotion_judge import EmotionJudge

    loads: list[str] = []  # the judge and the reference clips are read once (the upfront checks' copies reused)
    judge_load, gather = EmotionJudge.load, cloning.gather_references
    monkeypatch.setattr(EmotionJudge, "load", staticmethod(lambda *a: loads.append("judge") or judge_load(*a)))
    monkeypatch.setattr(cloning, "gather_references", lambda *a: loads.append("refs") or gather(*a))
    refs = ref_folder(tmp_path, "buzz_voice.wav", 6.0)
    out = tmp_path / "res" / "results.json"
    sets = ",".join(f"{lang}={path}" for lang, path in sentence_files.items())
    args = ["eval", "--model", str(tiny_model), "--sets", sets, "--limit", "1", "--out", str(out)]
    args += ["--duration", "--clone", "--clone-refs", str(refs), "--emotion"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(loads) == ["judge", "refs"]
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["sets"]) == {"en", "zh", "mixed"}
    for lang, primary in (("en", "wer"), ("zh", "cer"), ("mixed", "mer")):
        summary = data["sets"][lang]["summary"]
        assert summary["n"] == 1 and summary["primary"] == primary
        assert summary["metrics"][primary]["rate"] >= 0.0
        assert summary["metrics"][primary]["reference_length"] > 0
    assert set(data["sets"]["mixed"]["summary"]["metrics"]) == {"cer", "wer", "mer"}
    assert data["sets"]["en"]["items"][0]["text"] == EN
    clone = data["clone"]
    assert clone["references"] == 1 and clone["trials"] == 2  # one en + one zh sentence
    assert -1.0 <= clone["mean_cosine"] <= 1.0
    emotion = data["emotion"]
    assert emotion["trials"] == 2 * 2 * 5  # two voices x (en, zh) x five emotions
    assert set(emotion["per_emotion_accuracy"]) == {"neutral", "happy", "sad", "angry", "surprised"}
    assert set(emotion["error_rate_by_emotion"]) == {f"{e}/{lang}" for e in emotion["labels"] for lang in ("en", "zh")}
    assert set(emotion["error_rate_delta_ci95"]) == set(emotion["error_rate_delta_vs_neutral"])
    for key, (low, high) in emotion["error_rate_delta_ci95"].items():  # one sentence: every draw is the same
        assert low == high == pytest.approx(emotion["error_rate_delta_vs_neutral"][key], abs=1e-4)
    duration = data["duration"]
    assert duration["trials"] == 2 * 5
    assert duration["max_error"] < 0.05  # the model's exact-length path, one vocoder hop of slack at most
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "## Intelligibility" in md and "## Duration control" in md and "| en | 1 |" in md


def test_eval_scores_audio_made_elsewhere(tmp_path: Path) -> None:
    folder = tmp_path / "teacher"
    (folder / "en").mkdir(parents=True)
    sf.write(folder / "en" / "000.wav", np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
    (folder / "manifest.jsonl").write_text(json.dumps({"set": "en", "text": EN, "path": "en/000.wav"}) + "\n")
    out = tmp_path / "teacher.json"
    result = CliRunner().invoke(app, ["eval", "--audio-dir", str(folder), "--sets", "en", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    item = data["sets"]["en"]["items"][0]
    assert item["metrics"]["wer"]["reference_length"] == 5
    assert item["metrics"]["wer"]["deletions"] + item["metrics"]["wer"]["substitutions"] >= 1  # silence is not speech


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--clone"], "--corpus"), (["--emotion", "--emotion-sentences", "0"], "--emotion-sentences")],
)
def test_usage_errors_name_the_option(
    tiny_model: Path, sentence_files: dict[str, Path], flags: list[str], named: str
) -> None:
    sets = f"en={sentence_files['en']}"
    result = CliRunner().invoke(app, ["eval", "--model", str(tiny_model), "--sets", sets, *flags])
    assert result.exit_code == 2
    assert named in result.output


def test_emotion_sentences_caps_the_emotion_material(
    tiny_model: Path, sentence_files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "emotion.json"
    sets = f"en={sentence_files['en']}"  # two sentences, no --limit
    args = ["eval", "--model", str(tiny_model), "--sets", sets, "--emotion", "--emotion-sentences", "1"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["sets"]["en"]["summary"]["n"] == 2  # intelligibility still scores the whole set
    assert data["emotion"]["trials"] == 2 * 1 * 5  # two voices x one en sentence x five emotions


def test_clone_with_unusable_references_fails_before_rendering(
    tiny_model: Path, sentence_files: dict[str, Path], tmp_path: Path
) -> None:
    refs = ref_folder(tmp_path, "too_short.wav", 2.0)
    out = tmp_path / "never.json"
    sets = f"en={sentence_files['en']}"
    args = ["eval", "--model", str(tiny_model), "--sets", sets, "--clone", "--clone-refs", str(refs)]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2
    assert "no usable reference clip" in result.output and "too_short.wav" in result.output
    assert not out.exists()


def test_two_sets_of_one_language_are_both_kept(
    tiny_model: Path, sentence_files: dict[str, Path], tmp_path: Path
) -> None:
    other = tmp_path / "heldout" / "sentences_en.txt"
    other.parent.mkdir()
    other.write_text("Only one more thing.\n", encoding="utf-8")
    out = tmp_path / "two.json"
    sets = f"en={sentence_files['en']},en={other}"
    clips = tmp_path / "clips"
    args = ["eval", "--model", str(tiny_model), "--sets", sets, "--out", str(out), "--duration"]
    args += ["--keep-audio", str(clips)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data["sets"]) == ["en", f"en={other}"]
    texts = {item["text"] for item in data["duration"]["items"]}
    assert EN in texts and "Only one more thing." not in texts  # the expressive tests take the first set's
    assert data["sets"]["en"]["summary"]["n"] == 2 and data["sets"][f"en={other}"]["summary"]["n"] == 1
    assert data["sets"][f"en={other}"]["items"][0]["text"] == "Only one more thing."
    assert f"| en={other} | 1 |" in out.with_suffix(".md").read_text(encoding="utf-8")
    kept = sorted(p.relative_to(clips / "asr").as_posix() for p in (clips / "asr").rglob("*.wav"))
    assert kept == ["en-000.wav", "en-001.wav", "set1/en-000.wav"]  # the second set's clips do not overwrite

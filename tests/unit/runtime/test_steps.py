"""Batched chunk steps: windows, batched == unbatched per row, chunk audio == one-shot vocoding, durations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from rtvox.constants import FRAMES_PER_SECOND, HOP_LENGTH, N_MELS
from rtvox.models.vocoder import HiFiGAN, VocoderConfig, end_silence_frames, with_end_silence
from rtvox.models.vocos import Vocos, VocosConfig
from rtvox.runtime import Synthesizer
from rtvox.runtime.steps import ChunkJob
from rtvox.runtime.streaming import context_frames_for, plan_windows, vocode_batched
from rtvox.runtime.types import SynthesisRequest

from .conftest import assert_audio_close

TEXTS = [
    "你好，欢迎使用 rtvox。This is a quick demo of mixed Chinese and English speech, read in one voice to the end.",
    "Hi.",
    "今天天气很好，我们去公园散步吧。然后回家吃饭。",
    "The quick brown fox jumps over the lazy dog, again and again, until the sun goes down.",
]


def _loud_hifigan(seed: int = 0) -> HiFiGAN:
    # Rescaled init so output is O(0.1-1) and rounding-level differences stay meaningful.
    torch.manual_seed(seed)
    model = HiFiGAN(VocoderConfig.preset("tiny")).eval()
    for m in model.modules():
        if isinstance(m, nn.Conv1d | nn.ConvTranspose1d):
            fan_in = m.weight.shape[1 if isinstance(m, nn.Conv1d) else 0] * m.weight.shape[2]
            nn.init.normal_(m.weight, 0.0, 1.0 / fan_in**0.5)
    return model


@pytest.mark.parametrize("n_frames", [1, 7, 31, 32, 33, 64, 65, 200, 513])
@pytest.mark.parametrize(("context", "end"), [(0, 0), (16, 0), (16, 6), (16, 16), (16, 29)])
def test_windows_cover_every_frame_once_with_full_context_where_padded(n_frames: int, context: int, end: int) -> None:
    windows = plan_windows(3, n_frames, 64, context, end)
    assert windows[0].new_start == 0 and windows[-1].new_stop == n_frames
    for a, b in itertools.pairwise(windows):
        assert a.new_stop == b.new_start
    for w in windows:
        assert w.source == 3 and w.new_stop - w.new_start <= max(64, 2 * context)
        assert w.exact_left == (w.new_start - w.start < context)
        assert w.exact_right == (not end and w.stop - w.new_stop < context)
        if w.exact_left:
            assert w.start == 0  # short context only where the mel itself starts
        if w.exact_right:
            assert w.stop == n_frames
        # full right context, or all of it up to the end of the mel's end silence
        assert w.stop - w.new_stop >= context or w.stop == n_frames + end
    if n_frames >= 2 * context > 0:
        assert not any(w.exact_left and w.exact_right for w in windows)  # never needs an exact-length row
    if end:  # the end silence covers the receptive field: all windows right-padded, as few as the window allows
        assert len(windows) == -(-n_frames // 64) and windows[-1].stop == min(n_frames + end, n_frames + context)


@pytest.mark.parametrize("family", ["hifigan", "vocos"])
@pytest.mark.parametrize("with_end", [False, True])
def test_vocode_batched_equals_one_shot_per_mel(family: str, with_end: bool) -> None:
    """Each mel's audio is that of the mel with `end_frames` of silence appended (none: the vocoder's own zero
    padding past its end), vocoded at once and cut to the mel's own samples."""
    torch.manual_seed(1)
    vocoder: nn.Module = _loud_hifigan() if family == "hifigan" else Vocos(VocosConfig.preset("tiny")).eval()
    context = context_frames_for(vocoder)
    end = end_silence_frames(vocoder.config) if with_end else 0
    lengths = [1, 5, 2 * context - 1, 2 * context, 70, 301, 5, 130]
    mels = [torch.randn(N_MELS, n) for n in lengths]
    # max_rows=3 splits groups across calls; window_frames=64 makes several windows per long mel
    got = vocode_batched(vocoder, mels, end_frames=end, context_frames=context, window_frames=64, max_rows=3)
    for mel, audio in zip(mels, got, strict=True):
        n = mel.shape[-1] * HOP_LENGTH
        with torch.inference_mode():
            want = vocoder(with_end_silence(mel, end)[None])[0, :n].numpy()
        assert audio.shape == (n,)
        assert_audio_close(audio, want, rel=1e-5)


def _jobs(synth: Synthesizer) -> list[ChunkJob]:
    requests = [
        SynthesisRequest(text=TEXTS[0], voice="anna"),
        SynthesisRequest(text=TEXTS[1], voice="ben", speed=1.5),
        SynthesisRequest(text=TEXTS[2], emotion="happy", pitch_scale=1.4, energy_scale=0.7),
        SynthesisRequest(text=TEXTS[3], duration=2.0),
    ]
    prepared = [synth.prepare(r) for r in requests]
    return [ChunkJob(p, i) for p in prepared for i in range(len(p.chunks))]


def test_batched_step_equals_unbatched_per_row(rsynth: Synthesizer) -> None:
    jobs = _jobs(rsynth)
    lengths = {len(j.prepared.chunks[j.index].ids) for j in jobs}
    assert len(jobs) >= 6 and len(lengths) >= 4  # rows of really different lengths share the batch
    batched = rsynth.run_step(jobs)
    for job, out in zip(jobs, batched, strict=True):
        (alone,) = rsynth.run_step([job])
        assert out.durations == alone.durations and out.index == job.index and out.is_last == alone.is_last
        assert_audio_close(out.audio, alone.audio)
    assert any(len(set(o.durations)) > 1 for o in batched)  # durations really vary within rows


def test_chunk_audio_equals_one_shot_vocoding_of_its_mel(rsynth: Synthesizer) -> None:
    """A chunk's audio: its whole mel vocoded at once, followed by the chunk-end silence every path uses."""
    prepared = rsynth.prepare(SynthesisRequest(text=TEXTS[3]))
    for index, chunk in enumerate(rsynth.run_step([ChunkJob(prepared, i) for i in range(len(prepared.chunks))])):
        ids = torch.tensor([prepared.chunks[index].ids])
        mask = torch.ones_like(ids, dtype=torch.bool)
        one = torch.ones(1)
        with torch.inference_mode():
            acoustic = rsynth.bundle.acoustic
            hidden, durations = acoustic.encode(
                ids,
                mask,
                prepared.cond,
                one,
                torch.zeros(1, dtype=torch.long),
                one,
                one,
                torch.tensor([prepared.prosody]),
            )
            mel = with_end_silence(acoustic.decode(hidden, durations), rsynth.vocoder_end_frames)
            want = rsynth.bundle.vocoder(mel)[0, : len(chunk.audio)].numpy()
        assert chunk.durations == tuple(durations[0].tolist())
        assert len(chunk.audio) == sum(chunk.durations) * HOP_LENGTH
        assert_audio_close(chunk.audio, want)


def test_stream_concatenation_equals_synthesize(rsynth: Synthesizer) -> None:
    streamed = np.concatenate([c.audio for c in rsynth.stream(TEXTS[0], voice="ben")])
    whole = rsynth.synthesize(TEXTS[0], voice="ben").audio
    np.testing.assert_array_equal(streamed, whole)


def test_target_duration_is_exact_and_shared_over_chunks(rsynth: Synthesizer) -> None:
    prepared = rsynth.prepare(SynthesisRequest(text=TEXTS[0], duration=3.3))
    assert len(prepared.chunks) >= 2
    assert sum(c.target_frames for c in prepared.chunks) == round(3.3 * FRAMES_PER_SECOND)
    result = rsynth.synthesize(TEXTS[0], duration=3.3)
    assert len(result.audio) == round(3.3 * FRAMES_PER_SECOND) * HOP_LENGTH


def test_emotion_reference_embedding_is_cached_by_content(rsynth: Synthesizer) -> None:
    clip = (0.3 * np.sin(np.arange(24_000 * 3) / 9)).astype(np.float32)
    first = rsynth.embed_emotion(clip)
    misses = rsynth.embedding_cache.stats()["local"]["misses"]
    second = rsynth.embed_emotion(clip.copy())
    stats = rsynth.embedding_cache.stats()["local"]
    assert stats["misses"] == misses and stats["hits"] >= 1  # the second call was a hit
    np.testing.assert_array_equal(first, second)
    assert rsynth.emotion_cache_ns.startswith("emotion:")
    other = rsynth.embed_emotion(clip * 0.5)
    assert rsynth.embedding_cache.stats()["local"]["misses"] == misses + 1 and other.shape == first.shape


def test_skipped_symbols_take_no_time_and_keep_their_slots(runtime_model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A model whose config skips word boundaries: the acoustic model sees phonemes only, the chunk still
    reports one duration per frontend phoneme (0 for the skipped ones), and the audio matches the sum."""
    import dataclasses
    import shutil

    from rtvox.models.bundle import ModelBundle

    from .conftest import vary_durations

    path = tmp_path / "skip"
    shutil.copytree(runtime_model, path)
    bundle = ModelBundle.load(path)
    bundle.config = dataclasses.replace(bundle.config, skip_symbols=("#1", "#2"))
    bundle.save(path)
    assert ModelBundle.load(path).config.skip_symbols == ("#1", "#2")
    synth = vary_durations(Synthesizer(path, device="cpu"))
    prepared = synth.prepare(SynthesisRequest(text="The quick brown fox jumps over the lazy dog."))
    chunk = prepared.chunks[0]
    assert "#1" in chunk.phonemes and len(chunk.ids) == len(chunk.phonemes) - chunk.phonemes.count("#1")
    assert synth.vocab.id("#1") not in chunk.ids
    (out,) = synth.run_step([ChunkJob(prepared, 0)])
    assert len(out.durations) == len(chunk.phonemes)
    assert all(d == 0 for p, d in zip(chunk.phonemes, out.durations, strict=True) if p == "#1")
    assert all(d >= 1 for p, d in zip(chunk.phonemes, out.durations, strict=True) if p != "#1")
    assert out.audio.size == sum(out.durations) * HOP_LENGTH


def test_graphs_backend_step_matches_the_eager_step(
    runtime_model, rsynth: Synthesizer, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Backend "graphs" (the captured whole-chain pipeline; uncaptured on a CPU) serves a batch as the eager
    step does: same durations, same audio to each chunk's end (both give it the same end silence). The ci profile
    (2 rows, 64 phonemes) makes the step split the batch and send the longer chunks to the eager engines; a
    spectral tilt reaches the audio as `tilt_mel` does on the eager path."""
    import dataclasses

    from .conftest import vary_durations

    monkeypatch.setenv("RTVOX_PIPELINE_PROFILE", "ci")
    graphs = vary_durations(Synthesizer(runtime_model, device="cpu", backend="graphs"))
    graphs.build_engines()  # the pipeline holds its own copy of the weights: rebuild after the change
    assert graphs.pipeline is not None and graphs.pipeline.profile.batch.max == 2
    jobs = _jobs(rsynth)
    jobs[0] = ChunkJob(dataclasses.replace(jobs[0].prepared, tilt=0.7), jobs[0].index)
    timbre = np.linspace(-0.4, 0.4, 80, dtype=np.float32)  # a clone's timbre on another row, beside the tilt
    jobs[1] = ChunkJob(dataclasses.replace(jobs[1].prepared, timbre=timbre), jobs[1].index)
    lengths = [len(j.prepared.chunks[j.index].ids) for j in jobs]
    assert min(lengths) <= 64 < max(lengths) and len(jobs) > 2
    for got, want in zip(graphs.run_step(jobs), rsynth.run_step(jobs), strict=True):
        assert got.durations == want.durations and got.index == want.index and got.is_last == want.is_last
        assert got.audio.shape == want.audio.shape and got.audio.dtype == np.float32
        assert_audio_close(got.audio, want.audio, rel=1e-4)
    assert {key[0] for key in graphs.pipeline._slots} == {1, 2}  # served by the pipeline, split into rows of 2
    untilted = graphs.run_step([ChunkJob(dataclasses.replace(jobs[0].prepared, tilt=0.0), jobs[0].index)])[0]
    assert not np.array_equal(untilted.audio, graphs.run_step(jobs[:1])[0].audio)
    plain = graphs.run_step([ChunkJob(dataclasses.replace(jobs[1].prepared, timbre=None), jobs[1].index)])[0]
    assert not np.array_equal(plain.audio, graphs.run_step(jobs[1:2])[0].audio)


def test_host_conditions_are_reused_per_voice_emotion_and_alpha(rsynth: Synthesizer) -> None:
    """Label requests conditioned on the host share one cond per (speaker, emotion, α); it is the freshly computed
    value, any change of those makes another, and a rebuild of the engines starts afresh."""
    plain = SynthesisRequest(text="Hi.")
    cond = rsynth.condition(plain)
    assert rsynth.condition(SynthesisRequest(text="Other words.")) is cond
    rsynth._cond_cache.clear()
    torch.testing.assert_close(rsynth.condition(plain), cond, rtol=0, atol=0)
    for other in (
        SynthesisRequest(text="Hi.", emotion="sad"),
        SynthesisRequest(text="Hi.", emotion_alpha=0.5),
        SynthesisRequest(text="Hi.", voice=rsynth.voices.builtin_names[-1]),
    ):
        assert not torch.equal(rsynth.condition(other), cond)
    rsynth.build_engines()
    assert rsynth.condition(plain) is not cond


def test_encode_inputs_pads_ragged_rows_and_keeps_per_row_settings() -> None:
    from rtvox.models.prosody import IDENTITY_ROW
    from rtvox.runtime.steps import encode_inputs

    ids = [(5, 6, 7), (9,), (1, 2, 3, 4, 8)]
    requests = [SynthesisRequest(text="a", speed=s, pitch_scale=p) for s, p in ((1.0, 1.0), (0.5, 1.2), (2.0, 0.8))]
    conds = [torch.full((1, 4), float(i)) for i in range(3)]
    rates = (1.0, 1.0, 0.9)  # the third chunk's language speaks at 0.9 of the request's speed
    rows = [
        (i, c, r, t, IDENTITY_ROW, rate)
        for i, c, r, t, rate in zip(ids, conds, requests, (0, 40, 0), rates, strict=True)
    ]
    phonemes, mask, cond, speed, target, pitch, energy, prosody = encode_inputs(rows, torch.device("cpu"))
    assert phonemes.dtype == torch.long and mask.dtype == torch.bool and phonemes.shape == (3, 5)
    assert phonemes.tolist() == [[5, 6, 7, 0, 0], [9, 0, 0, 0, 0], [1, 2, 3, 4, 8]]
    assert mask.tolist() == [[True] * 3 + [False] * 2, [True] + [False] * 4, [True] * 5]
    assert cond[:, 0].tolist() == [0.0, 1.0, 2.0]
    assert speed.tolist() == pytest.approx([1.0, 0.5, 1.8]) and target.tolist() == [0, 40, 0]
    assert pitch.tolist() == pytest.approx([1.0, 1.2, 0.8]) and energy.tolist() == [1.0, 1.0, 1.0]
    assert prosody.shape == (3, 4)


def test_encode_arrays_take_conds_of_any_float_dtype() -> None:
    from rtvox.runtime.steps import encode_arrays

    request = SynthesisRequest(text="hi")
    rows = [
        ((3, 4, 5), torch.ones(1, 6, dtype=torch.bfloat16), request, 0, (0.0, 1.0, 0.0, 1.0), 1.0),
        ((7,), torch.full((1, 6), 0.5), request, 12, (0.1, 1.0, 0.0, 1.0), 1.25),
    ]
    phonemes, mask, cond, speed, target, pitch, energy, prosody = encode_arrays(rows)
    assert phonemes.tolist() == [[3, 4, 5], [7, 0, 0]] and mask.tolist() == [[True] * 3, [True, False, False]]
    assert cond.dtype == np.float32 and cond.tolist() == [[1.0] * 6, [0.5] * 6]
    assert speed.tolist() == [1.0, 1.25] and target.tolist() == [0, 12] and prosody.shape == (2, 4)
    assert pitch.tolist() == energy.tolist() == [1.0, 1.0]

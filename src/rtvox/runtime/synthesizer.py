"""The Synthesizer: text in, audio chunks out, through frontend → conditioning → acoustic model → vocoder."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rtvox.audio.mel import MelSpectrogram
from rtvox.audio.reference import prepare_reference
from rtvox.constants import EMOTIONS, FRAMES_PER_SECOND, MAX_DURATION_SQUEEZE, SAMPLE_RATE, SPEAKER_SAMPLE_RATE
from rtvox.engines import Engine
from rtvox.engines.base import resolve_device
from rtvox.engines.build import build_engines as build_engine_set
from rtvox.engines.build import parse_dtype
from rtvox.engines.pipeline import PipelineEngine
from rtvox.engines.quality import random_inputs
from rtvox.engines.shapes import ShapeProfile
from rtvox.errors import AudioInputError, InputError, ModelError, TextError
from rtvox.models.ar_bundle import ARBundle, load_bundle
from rtvox.models.bundle import ModelBundle, ModelConfig, resolve_model
from rtvox.models.emotion import fuse_condition
from rtvox.models.prosody import IDENTITY_ROW, ProsodyRow
from rtvox.models.speaker import SpeakerEncoder, default_speaker_encoder_dir
from rtvox.models.vocoder import end_silence_frames
from rtvox.runtime.ar_steps import ARChunkStep, check_request
from rtvox.runtime.cache import EmbeddingCache
from rtvox.runtime.steps import (
    ChunkJob,
    PreparedChunk,
    PreparedRequest,
    allocate_frames,
    launch_pipeline_step,
    natural_durations,
    ready,
    run_chunk_step,
    run_pipeline_step,
)
from rtvox.runtime.streaming import DEFAULT_MAX_ROWS, context_frames_for
from rtvox.runtime.timbre import CALIBRATION, speech_mel_mean, timbre_offset
from rtvox.runtime.types import AudioChunk, SynthesisRequest, SynthesisResult, Voice
from rtvox.runtime.voices import VoiceStore, validate_voice_name
from rtvox.text import Frontend, FrontendResult, Lexicon, Vocabulary
from rtvox.text.vocab import phoneme_langs

AudioSource = str | os.PathLike[str] | bytes | np.ndarray
ProgressFn = Callable[[int, int], None]  # (chunks done, chunks in all)


# Synthesizer backend name of the captured whole-chain pipeline (not an engine-registry backend: it spans modules).
PIPELINE_BACKEND = "graphs"

# Cache namespace of speaker embeddings: bump the version if the encoder or its preprocessing changes.
SPEAKER_CACHE_NS = "speaker:ge2e-v1"
SPECTRUM_CACHE_NS = "spectrum:logmel-v1"  # a clip's speech spectrum (rtvox.runtime.timbre.speech_mel_mean)
TIMBRE_CACHE_SIZE = 256  # clone timbres kept per synthesizer (oldest dropped first)
COND_CACHE_SIZE = 1024  # host-made cond vectors kept (voices x emotions x alphas in use); cleared when full


CPU_VOCODER_ROWS = 4  # vocoder windows per call in a CPU step (Synthesizer.vocoder_max_rows)


class Synthesizer:
    """Turns requests into audio. Owns the loaded model bundle (either family), the engines built from it (the
    AR family: its decode engine), the text frontend, the voice store and the speaker encoder used for cloning.
    One instance serves many requests; it is not thread-safe (the runtime's executor gives it one thread).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str = "auto",
        backend: str = "eager",
        dtype: str = "float32",
        voices_dir: str | os.PathLike[str] | None = None,
        lexicon: Lexicon | None = None,
        embedding_cache: EmbeddingCache | None = None,
        fused_frames: bool | None = None,
    ) -> None:
        self.model_dir = resolve_model(model)
        self.device = resolve_device(device)
        # "auto" on a GPU: the captured whole-chain pipeline (the fastest verified path there); elsewhere the
        # engine builder's per-module choice
        self.backend = PIPELINE_BACKEND if backend == "auto" and self.device.type == "cuda" else backend
        # Where condition vectors are made and kept. The captured pipeline takes its inputs from the host, so its
        # requests are conditioned on the CPU: no device round trip per request, none per step, and `prepare`
        # can run off the engine thread (`prepares_on_host`).
        self.cond_device = torch.device("cpu") if self.backend == PIPELINE_BACKEND else self.device
        self._emotion_rows: torch.Tensor | None = None  # every label's emotion row on the host (graphs backend)
        # cond vectors of label requests made on the host, by (speaker embedding bytes, emotion, α): a busy server
        # conditions thousands of requests a second on a handful of voices
        self._cond_cache: dict[tuple[bytes, str, float], torch.Tensor] = {}
        self.dtype = parse_dtype(dtype)  # compute precision of compiled engines (eager and onnx run fp32)
        # The captured pipeline's Vocos blocks as fused Triton kernels (None: RTVOX_PIPELINE_FUSED=1 turns them on).
        # Slower at batch 1; they pay under load where the device is the limit, e.g. two server processes on one
        # GPU (BENCHMARKS.md, runs 22 and 24-26), which is where `rtvox serve` turns them on by default.
        if fused_frames is None:
            fused_frames = os.environ.get("RTVOX_PIPELINE_FUSED", "0") == "1"
        self.fused_frames = bool(fused_frames) and self.backend == PIPELINE_BACKEND
        self.bundle = load_bundle(self.model_dir, device=self.device, dtype=torch.float32)
        self.vocab = Vocabulary.from_dict(self.bundle.vocab)
        self.frontend = Frontend(lexicon=lexicon)
        self.lead_ids = self._lead_ids()
        self.voices = VoiceStore(self._builtin_voices(), clones_dir=voices_dir)
        self.default_voice = self.bundle.config.default_voice or self.voices.builtin_names[0]
        self._speaker_encoder: SpeakerEncoder | None = None
        self._emotion_ns: str | None = None
        self._timbres: dict[bytes, np.ndarray] = {}  # (embedding, spectrum) bytes → timbre offset, this model's
        self.embedding_cache = embedding_cache if embedding_cache is not None else EmbeddingCache()
        self._mel = MelSpectrogram().to(self.device)
        # Windows of the streamed vocoder need at least the vocoder's receptive field of context on each side.
        self.vocoder_context_frames = context_frames_for(self.bundle.vocoder)
        # Silence every chunk is vocoded with past its end, on every path (the chunk-end rule, models.vocoder).
        self.vocoder_end_frames = end_silence_frames(self.bundle.config.vocoder)
        self.engines: dict[str, Engine] = {}
        self.pipeline: PipelineEngine | None = None  # backend "graphs": the captured whole-chain engine
        self._ar_step: ARChunkStep | None = None
        self.build_engines()

    # ------------------------------------------------------------------ setup helpers

    def _lead_ids(self) -> dict[str, tuple[int, ...]]:
        """The model's lead-in per language (ModelConfig.lead_in) as the ids it sees."""
        config = self.bundle.config
        if not isinstance(config, ModelConfig):
            return {}
        out = {}
        for lang, text in config.lead_in.items():
            try:
                phonemes = lead_in_phonemes(self.frontend, lang, text)
            except ValueError as e:
                raise ModelError(f"config.json: {e}") from e
            ids, _ = self.vocab.encode_for_model(phonemes, config.skip_symbols)
            out[lang] = tuple(ids)
        return out

    def chunk_lead(self, phonemes: Sequence[str]) -> tuple[int, ...]:
        """The lead-in ids for a chunk: those of its first tagged phoneme's language (none if the model has none)."""
        if not self.lead_ids:
            return ()
        langs = phoneme_langs(phonemes)
        return self.lead_ids.get(langs[0], ()) if langs else ()

    def _builtin_voices(self) -> list[Voice]:
        meta: dict[str, dict[str, Any]] = {m["name"]: m for m in self.bundle.voices_meta}
        voices = []
        for name, emb in self.bundle.voices.items():
            info = meta.get(name, {})
            voices.append(
                Voice(
                    name=name,
                    embedding=emb.detach().float().cpu().numpy(),
                    language=str(info.get("language", "")),
                    gender=str(info.get("gender", "unknown")),
                    description=str(info.get("description", "")),
                    builtin=True,
                )
            )
        if not voices:
            raise ModelError(f"{self.model_dir} has no built-in voices (voices.safetensors is empty)")
        return voices

    @property
    def speaker_encoder(self) -> SpeakerEncoder:
        if self._speaker_encoder is None:
            self._speaker_encoder = SpeakerEncoder.load(default_speaker_encoder_dir())
        return self._speaker_encoder

    # ------------------------------------------------------------------ voices
    def clone_voice(self, name: str, reference: AudioSource, *, description: str = "") -> Voice:
        """Make a voice from a 3–30 s reference clip and persist it under `name` (its embedding and the clip's
        speech spectrum, from which each model that speaks it derives the clone's timbre)."""
        validate_voice_name(name)  # before the embedding, so a bad name fails fast
        data, label = self._reference_bytes(reference), self._reference_label(reference)  # read once (a pipe)
        embedding = self._embed_bytes(data, label, "reference_audio")
        spectrum = self._spectrum_bytes(data, label, "reference_audio")
        voice = Voice(name=name, embedding=embedding, description=description, builtin=False, spectrum=spectrum)
        return self.voices.add(voice)

    # ------------------------------------------------------------------ timbre matching (rtvox.runtime.timbre)
    @property
    def timbre_strength(self) -> float:
        """The model's `timbre_match` (0: clones are not timbre-matched; the AR family has none)."""
        return float(self.bundle.config.timbre_match) if isinstance(self.bundle, ModelBundle) else 0.0

    def reference_spectrum(self, reference: AudioSource, *, param: str = "reference_audio") -> np.ndarray:
        """Mean log-mel [n_mels] of a reference clip's speech (decoded, checked and leveled as for the speaker
        embedding), cached by a hash of the clip's bytes. It depends on the clip alone, so clones keep it."""
        return self._spectrum_bytes(self._reference_bytes(reference), self._reference_label(reference), param)

    def _spectrum_bytes(self, data: bytes, label: str | None, param: str) -> np.ndarray:
        def compute() -> np.ndarray:
            clip = prepare_reference(data, sr=SAMPLE_RATE, param=param, label=label)
            return speech_mel_mean(self._mel_of, clip).astype(np.float32)

        return self.embedding_cache.get_or_compute(SPECTRUM_CACHE_NS, data, compute)

    def _mel_of(self, audio: torch.Tensor) -> torch.Tensor:
        return self._mel(audio.to(self.device))

    def calibration_requests(self, embedding: np.ndarray) -> list[SynthesisRequest]:
        """What the model speaks with a clone's embedding (no timbre) to measure its own spectrum for it."""
        return [SynthesisRequest(text=text, speaker_embedding=embedding) for text in CALIBRATION]

    def timbre_from_renders(self, spectrum: np.ndarray, renders: Sequence[np.ndarray]) -> np.ndarray:
        """The clone's timbre offset from its clip's spectrum and the model's audio of `calibration_requests`."""
        own = [speech_mel_mean(self._mel_of, audio) for audio in renders]
        return timbre_offset(spectrum, own, self.timbre_strength)

    def timbre_key(self, embedding: np.ndarray, spectrum: np.ndarray) -> bytes:
        """What a clone's timbre depends on besides this model: its embedding and its clip's spectrum."""
        return np.asarray(embedding, np.float32).tobytes() + np.asarray(spectrum, np.float32).tobytes()

    def speaker_timbre(self, embedding: np.ndarray, spectrum: np.ndarray) -> np.ndarray | None:
        """The timbre offset this model adds to a clone's mel (None when the model does no timbre matching):
        renders the calibration sentences here on first use, then remembers it. Not for a thread that shares
        this synthesizer's engines with a service (the server renders through its queue: rtvox.server.voices)."""
        if self.timbre_strength <= 0.0:
            return None
        key = self.timbre_key(embedding, spectrum)
        timbre = self._timbres.get(key)
        if timbre is None:
            renders = [self.synthesize_request(r).audio for r in self.calibration_requests(embedding)]
            timbre = self.remember_timbre(key, self.timbre_from_renders(spectrum, renders))
        return timbre

    def voice_timbre(self, name: str) -> np.ndarray | None:
        """The timbre offset of a voice by name: a clone's that has a spectrum, else None (`speaker_timbre`'s
        rendering rules apply)."""
        voice = self.voices.get(name)
        return None if voice.spectrum is None else self.speaker_timbre(voice.embedding, voice.spectrum)

    def cached_timbre(self, key: bytes) -> np.ndarray | None:
        return self._timbres.get(key)

    def remember_timbre(self, key: bytes, timbre: np.ndarray) -> np.ndarray:
        if len(self._timbres) >= TIMBRE_CACHE_SIZE:
            self._timbres.pop(next(iter(self._timbres)))
        self._timbres[key] = timbre
        return timbre

    def speaker_profile(self, reference: AudioSource, *, param: str = "reference_audio") -> dict[str, Any]:
        """`speaker_embedding` and `speaker_timbre` of a reference clip, as SynthesisRequest's keyword arguments.
        The clip is read once (a pipe gives its bytes only once)."""
        data, label = self._reference_bytes(reference), self._reference_label(reference)
        embedding = self._embed_bytes(data, label, param)
        timbre = None
        if self.timbre_strength > 0.0:
            timbre = self.speaker_timbre(embedding, self._spectrum_bytes(data, label, param))
        return {"speaker_embedding": embedding, "speaker_timbre": timbre}

    def embed_speaker(self, reference: AudioSource, *, param: str = "reference_audio") -> np.ndarray:
        """GE2E embedding of a reference clip, cached by a hash of the clip's bytes; a bad clip raises
        AudioInputError naming `param` (the request field it came in)."""
        return self._embed_bytes(self._reference_bytes(reference), self._reference_label(reference), param)

    def _embed_bytes(self, data: bytes, label: str | None, param: str) -> np.ndarray:
        return self.embedding_cache.get_or_compute(
            SPEAKER_CACHE_NS,
            data,
            lambda: self.speaker_encoder.embed_utterance(
                prepare_reference(data, sr=SPEAKER_SAMPLE_RATE, param=param, label=label)
            ),
        )

    def embed_emotion(self, reference: np.ndarray) -> np.ndarray:
        """Emotion embedding [E] of a reference clip (float32 mono at SAMPLE_RATE), cached by a hash of its samples."""
        bundle = self.bundle
        if not isinstance(bundle, ModelBundle):
            raise InputError(
                "this model (autoregressive family) has no emotion encoder, so it cannot take an emotion reference "
                "clip; give an emotion label instead",
                param="emotion_reference",
            )
        wav = np.ascontiguousarray(reference, dtype=np.float32)

        def compute() -> np.ndarray:
            with torch.inference_mode():
                mel = self._mel(torch.from_numpy(wav).to(self.device)[None])
                emotion, _ = bundle.emotion_encoder(mel)
            return emotion[0].float().cpu().numpy()

        return self.embedding_cache.get_or_compute(self.emotion_cache_ns, wav.tobytes(), compute)

    @property
    def emotion_cache_ns(self) -> str:
        """Cache namespace of emotion embeddings: names this model's emotion encoder by a hash of its weights."""
        if self._emotion_ns is None:
            digest = hashlib.sha256()
            for path in sorted(self.model_dir.glob("emotion*.safetensors")):
                digest.update(path.read_bytes())
            self._emotion_ns = f"emotion:{digest.hexdigest()[:16]}"
        return self._emotion_ns

    @staticmethod
    def _reference_bytes(reference: AudioSource) -> bytes:
        if isinstance(reference, bytes):
            return reference
        if isinstance(reference, np.ndarray):
            raise InputError("pass reference audio as a file path or encoded bytes, not a bare array")
        try:
            data = Path(reference).read_bytes()
        except FileNotFoundError:
            raise AudioInputError(f"reference clip {reference} does not exist", param="reference_audio") from None
        except OSError as exc:
            raise AudioInputError(f"cannot read reference clip {reference}: {exc.strerror}") from None
        if not data:  # an empty file, or a device or pipe that gave nothing: name it, not an API field
            raise AudioInputError(
                f"reference clip {reference} is empty; give 3–30 s of speech", param="reference_audio"
            )
        return data

    def load_reference(self, reference: AudioSource, sr: int = SAMPLE_RATE) -> np.ndarray:
        """A reference clip (path or encoded bytes) decoded, checked and resampled to `sr` (emotion_ref input)."""
        return self._reference(reference, sr)

    @classmethod
    def _reference(cls, reference: AudioSource, sr: int) -> np.ndarray:
        return prepare_reference(cls._reference_bytes(reference), sr=sr, label=cls._reference_label(reference))

    @staticmethod
    def _reference_label(reference: AudioSource) -> str | None:
        """How a clip's errors name it: a file (or pipe) by its path; uploaded bytes by their request field. The
        clip is decoded from the bytes read once, which are also its cache key."""
        return str(reference) if isinstance(reference, str | os.PathLike) else None

    # ------------------------------------------------------------------ synthesis
    def synthesize(self, text: str, **kwargs: Any) -> SynthesisResult:
        """Synthesize the whole text; keyword arguments are those of SynthesisRequest."""
        return _whole(self.stream(text, **kwargs))

    def stream(self, text: str, *, emotion_ref: AudioSource | None = None, **kwargs: Any) -> Iterator[AudioChunk]:
        """Yield audio chunk by chunk (the first chunk is short so playback can start early). A cloned voice by
        name gets its timbre here (`speaker_timbre`)."""
        ref = None if emotion_ref is None else self._reference(emotion_ref, SAMPLE_RATE)
        request = SynthesisRequest(text=text, emotion_ref=ref, **kwargs)
        if request.voice is not None and request.speaker_embedding is None and request.speaker_timbre is None:
            timbre = self.voice_timbre(request.voice)
            if timbre is not None:
                request = dataclasses.replace(request, speaker_timbre=timbre)
        return self.stream_request(request)

    def synthesize_request(self, request: SynthesisRequest) -> SynthesisResult:
        """`synthesize` of a ready SynthesisRequest (no voice lookup for timbre)."""
        return _whole(self.stream_request(request))

    def stream_request(self, request: SynthesisRequest) -> Iterator[AudioChunk]:
        """The simple one-request path: prepare, then one chunk step per chunk (the service batches the same steps)."""
        prepared = self.prepare(request)
        return (self.run_step([ChunkJob(prepared, i)])[0] for i in range(len(prepared.chunks)))

    # ------------------------------------------------------------------ public steps (shared with the service)
    def prepare(self, request: SynthesisRequest, front: FrontendResult | None = None) -> PreparedRequest:
        """Frontend + condition (+ the split of a target duration over chunks): everything before the chunk steps.

        `front`: the frontend's result for request.text, already made elsewhere (the service runs the frontend off
        the engine thread; it is thread-safe). Raises TextError when the text has nothing to speak,
        InputError for what the model's family cannot do. Runs acoustic_encode once when `duration` is set
        (default family).
        """
        if front is None:
            front = self.frontend.process(request.text)
        if not front.chunks:
            detail = f" ({'; '.join(front.warnings)})" if front.warnings else ""
            raise TextError(
                f"nothing to speak: the text has no Chinese or English words{detail}; rtvox reads zh and en only",
                param="input",
            )
        cond = self.condition(request)
        prosody, tilt = self.emotion_prosody(request)
        skip = self.bundle.config.skip_symbols
        leads = [self.chunk_lead(chunk.phonemes) for chunk in front.chunks]
        encoded = [self.vocab.encode_for_model(chunk.phonemes, skip) for chunk in front.chunks]
        ids = [list(lead) + i for lead, (i, _) in zip(leads, encoded, strict=True)]
        # Language rates are the neutral speaking rate: a label's prosody prior sets its own duration ratio (solved
        # against the model's native rate), so emotional requests keep that; the AR family keeps its own lengths.
        config = self.bundle.config
        rates = [1.0] * len(front.chunks)
        if isinstance(config, ModelConfig) and prosody == IDENTITY_ROW:
            rates = [config.chunk_rate(c.phonemes) for c in front.chunks]
        targets = [0] * len(ids)
        contents = [0] * len(ids)
        if request.duration is not None:
            # Exact total length: share the target among chunks by their natural lengths (an AR model's are unknown
            # before generation: phoneme counts stand in for them).
            total = round(request.duration * FRAMES_PER_SECOND)
            if total < len(ids):  # every chunk needs a frame of its own (0 is "no target": its natural length)
                raise InputError(
                    f"duration {request.duration:g} s is too short for this text ({len(ids)} chunks need at least "
                    f"{_seconds_up(len(ids)):g} s); give a longer duration or less text",
                    param="duration",
                )
            lead_frames = [0] * len(ids)
            if isinstance(self.bundle, ARBundle):
                natural = [len(i) for i in ids]
            else:
                table = natural_durations(self.engines, ids, cond, request, prosody, device=self.device, rates=rates)
                lead_frames = [sum(row[: len(lead)]) for row, lead in zip(table, leads, strict=True)]
                natural = [sum(row) - n for row, n in zip(table, lead_frames, strict=True)]
                # squeezed further than OpenAI's fastest speed, phonemes drop out of the audio
                shortest = math.ceil(sum(natural) / MAX_DURATION_SQUEEZE)
                if total < shortest:
                    raise InputError(
                        f"duration {request.duration:g} s is too short for this text: unforced it takes "
                        f"{sum(natural) / FRAMES_PER_SECOND:.2f} s and a target may squeeze that at most "
                        f"{MAX_DURATION_SQUEEZE:g}x, to {_seconds_up(shortest):g} s; "
                        "give a longer duration or less text",
                        param="duration",
                    )
            targets = allocate_frames(natural, total)
            if any(leads):
                # the model renders the lead-in too, stretched as the chunk is; the audio keeps the chunk's target
                contents = [t if lead else 0 for t, lead in zip(targets, leads, strict=True)]
                targets = [
                    t + round(n * t / max(nat, 1)) for t, n, nat in zip(targets, lead_frames, natural, strict=True)
                ]
        chunks = tuple(
            PreparedChunk(
                text=c.text,
                phonemes=c.phonemes,
                ids=tuple(i),
                target_frames=t,
                positions=pos,
                rate=r,
                lead=len(lead),
                content_frames=k,
            )
            for c, i, (_, pos), t, r, lead, k in zip(
                front.chunks, ids, encoded, targets, rates, leads, contents, strict=True
            )
        )
        prepared = PreparedRequest(
            request=request,
            normalized=front.normalized,
            chunks=chunks,
            cond=cond,
            prosody=prosody,
            tilt=tilt,
            timbre=request.speaker_timbre if isinstance(self.bundle, ModelBundle) else None,
            warnings=front.warnings,
        )
        if isinstance(self.bundle, ARBundle):
            check_request(self.bundle, prepared)
        return prepared

    def run_step(self, jobs: Sequence[ChunkJob]) -> list[AudioChunk]:
        """One batched chunk step on this synthesizer's engines (jobs prepared elsewhere are moved here)."""
        if self._ar_step is not None:
            return self._ar_step(jobs)
        if self.pipeline is not None:
            return run_pipeline_step(
                self.pipeline,
                self.engines,
                jobs,
                self.device,
                context_frames=self.vocoder_context_frames,
                end_frames=self.vocoder_end_frames,
            )
        return run_chunk_step(
            self.engines,
            jobs,
            self.device,
            context_frames=self.vocoder_context_frames,
            end_frames=self.vocoder_end_frames,
            max_rows=self.vocoder_max_rows,
        )

    def launch_step(self, jobs: Sequence[ChunkJob]) -> Callable[[], list[AudioChunk]]:
        """`run_step` in two halves: launch now, `finish()` (callable from any thread) returns the chunks. With
        the captured pipeline the device is still decoding when this returns (rtvox.runtime.steps.
        launch_pipeline_step); other engines finish the step here and `finish` only hands it over."""
        if self.pipeline is not None and self._ar_step is None:
            return launch_pipeline_step(
                self.pipeline,
                self.engines,
                jobs,
                self.device,
                context_frames=self.vocoder_context_frames,
                end_frames=self.vocoder_end_frames,
            )
        return ready(self.run_step(jobs))

    def build_engines(self) -> None:
        """(Re)build every engine from the loaded weights: at load, and to recover an engine after a fault.

        Through the engines' builder: the on-disk engine cache, warm-up of every shape bucket, and for
        backend "auto" the fastest verified backend of the device with a per-module fallback to eager. The AR
        family has one engine of its own (`backend` does not apply): a continuous-batching decoder, CUDA graphs
        on GPU.

        Backend "graphs" (the GPU serving path): the whole encode → decode → vocoder chain as captured programs
        per (batch, phonemes, frames) bucket of the `serve` shape profile (`rtvox.engines.pipeline`), every bucket
        captured here; eager engines beside it serve what falls outside the profile and target-duration lookups.
        Its frame-rate half runs in bf16 on CUDA (float16 if asked), in `dtype` on the CPU."""
        if isinstance(self.bundle, ARBundle):
            self._ar_step = ARChunkStep(self.bundle, self.device, self.vocoder_context_frames)
            return
        self._cond_cache.clear()  # conds follow the weights as the engines are built from them
        if self.backend == PIPELINE_BACKEND:
            with torch.inference_mode():  # every label's row on the host, so conditioning never touches the device
                labels = torch.arange(len(EMOTIONS), device=self.device)
                self._emotion_rows = self.bundle.emotion_table(labels).to(self.cond_device)
            engines = build_engine_set(self.bundle, "eager", self.device, torch.float32)
            self.pipeline = None  # the old one's graphs and pool go before the new one captures
            self.pipeline = self._build_pipeline()
            self.engines = engines
            return
        built = build_engine_set(self.bundle, self.backend, self.device, self.dtype)
        self.engines = built  # swapped whole, so a reader never sees a half-built set

    def _build_pipeline(self) -> PipelineEngine:
        assert isinstance(self.bundle, ModelBundle)
        dtype = self.dtype
        if self.device.type == "cuda" and dtype == torch.float32:
            dtype = torch.bfloat16
        profile = ShapeProfile.preset(os.environ.get("RTVOX_PIPELINE_PROFILE", "serve"))
        # kernels inside the graphs: eager (default; capturing the whole grid takes seconds), or torch.compile'd
        # ("dynamic": one compile for every bucket; "default": one per bucket, minutes)
        kernels = os.environ.get("RTVOX_PIPELINE_COMPILE", "none")
        compile_mode = None if kernels == "none" else kernels
        # the encoder's fp32 matmuls on TF32 tensor cores (RTVOX_PIPELINE_TF32=1; off by default, see BENCHMARKS.md)
        tf32 = os.environ.get("RTVOX_PIPELINE_TF32", "0") == "1"
        pipeline = PipelineEngine(
            self.bundle,
            self.device,
            profile,
            dtype=dtype,
            compile_mode=compile_mode,
            encode_tf32=tf32,
            fused_frames=self.fused_frames,
        )
        cfg = self.bundle.config.acoustic
        if self.device.type == "cuda":  # capture every bucket now: none may be captured while serving
            pipeline.warmup(random_inputs([min(16, profile.phonemes.max)], cfg.cond_dim, cfg.vocab_size, [0]))
        return pipeline

    def synthesize_many(
        self, requests: Iterable[SynthesisRequest], *, max_batch: int = 64, progress: ProgressFn | None = None
    ) -> Iterator[SynthesisResult]:
        """Offline batch API: many requests in large static batches (see runtime.offline); results in order."""
        from rtvox.runtime.offline import synthesize_many

        return synthesize_many(self, requests, max_batch=max_batch, progress=progress)

    def emotion_prosody(self, request: SynthesisRequest) -> tuple[ProsodyRow, float]:
        """The emotion prosody prior (model config `emotion_prosody`) of a label request at its α: the acoustic
        model's prosody row and the spectral tilt added to its mel.

        An emotion reference clip gets the identity: its emotion reaches the model only through the learned
        embedding (the clip's own prosody is not a label's average). So does the AR family (no such input)."""
        if request.emotion_ref is not None or not isinstance(self.bundle, ModelBundle):
            return IDENTITY_ROW, 0.0
        prior = self.bundle.config.emotion_prosody
        alpha = self.emotion_strength(request)
        return prior.row(request.emotion, alpha), prior.tilt(request.emotion, alpha)

    def emotion_strength(self, request: SynthesisRequest) -> float:
        """The α a request is conditioned at: a label request's emotion_alpha times the model's calibrated
        strength for that label (config `emotion_strength`); an emotion clip's α (and the AR family's) as given."""
        if request.emotion_ref is not None or not isinstance(self.bundle, ModelBundle):
            return float(request.emotion_alpha)
        return self.bundle.config.label_alpha(request.emotion, request.emotion_alpha)

    @property
    def preemptible(self) -> bool:
        """Whether this synthesizer's steps stop at preemption points (rtvox.runtime.preempt) where urgent work
        on its engine thread may run: the per-module engines' steps do; the captured pipeline (one program per
        step, and on a GPU the step launches asynchronously) and the AR family's decoder (its running batch is
        state a nested step would change) do not."""
        return self.pipeline is None and self._ar_step is None

    @property
    def vocoder_max_rows(self) -> int:
        """Most vocoder windows per vocoder call in a step. On a CPU 4: a preemption point every ~100 ms of a long
        chunk's vocoding, and on the 2-core VM as fast as any (medians of 15: 16 windows of 60 frames 258 ms at 4
        rows a call, 360 at 1, 491 at 64; 8 of 150 frames 139 / 213 / 180)."""
        return CPU_VOCODER_ROWS if self.device.type == "cpu" else DEFAULT_MAX_ROWS

    def prepares_on_host(self, request: SynthesisRequest) -> bool:
        """Whether `prepare(request, front)` runs no engine and touches no device (conditioning on the CPU, no
        target-duration lookup, no emotion clip to embed): then it is cheap and safe beside a running step."""
        return (
            self.cond_device.type == "cpu"
            and isinstance(self.bundle, ModelBundle)
            and request.duration is None
            and request.emotion_ref is None
        )

    def condition(self, request: SynthesisRequest) -> torch.Tensor:
        """cond[1, C] = speaker ⊕ α·emotion, on `cond_device`; a label request's speaker is first moved by the
        model's `emotion_speaker_shift` (rtvox.models.prosody.EmotionSpeakerShift)."""
        device = self.cond_device
        if request.speaker_embedding is not None:
            embedding = np.asarray(request.speaker_embedding, dtype=np.float32)
        else:
            embedding = self.voices.get(request.voice or self.default_voice).embedding
        strength = self.emotion_strength(request)
        key = None
        if device.type == "cpu" and request.emotion_ref is None:
            key = (embedding.tobytes(), request.emotion or "neutral", strength)
            cached = self._cond_cache.get(key)
            if cached is not None:
                return cached  # callers never write into a cond
        if request.emotion_ref is None and isinstance(self.bundle, ModelBundle):  # the shift is part of the key
            shift = self.bundle.config.emotion_speaker_shift
            embedding = shift.apply(embedding, request.emotion, strength)
        speaker = torch.from_numpy(embedding).to(device)[None]
        with torch.inference_mode():
            if request.emotion_ref is not None:
                emotion = torch.from_numpy(self.embed_emotion(request.emotion_ref)).to(device)[None]
            else:
                index = EMOTIONS.index(request.emotion or "neutral")
                if self._emotion_rows is not None:
                    emotion = self._emotion_rows[index][None]
                else:
                    emotion = self.bundle.emotion_table(torch.tensor([index], device=self.device)).to(device)
            alpha = torch.tensor([strength], device=device)
            cond = fuse_condition(speaker, emotion, alpha)
        if key is not None:
            if len(self._cond_cache) >= COND_CACHE_SIZE:
                self._cond_cache.clear()
            self._cond_cache[key] = cond
        return cond


def lead_in_phonemes(frontend: Frontend, lang: str, text: str) -> list[str]:
    """A lead-in text's phonemes (ModelConfig.lead_in) with a comma's pause (#3) in place of its closing boundary,
    so a chunk's own first phoneme follows a pause; ValueError unless it reads as one short `lang` phrase."""
    chunks = frontend.process(text).chunks
    phonemes = list(chunks[0].phonemes) if len(chunks) == 1 else []
    if not any(p.startswith(f"{lang}:") for p in phonemes):
        raise ValueError(f"lead_in[{lang!r}] = {text!r} must read as one short {lang} phrase")
    if phonemes[-1].startswith("#"):
        phonemes[-1] = "#3"
    else:
        phonemes.append("#3")
    return phonemes


def _whole(stream: Iterable[AudioChunk]) -> SynthesisResult:
    """A stream's chunks as one utterance."""
    chunks = tuple(stream)
    audio = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
    return SynthesisResult(audio=audio, sample_rate=SAMPLE_RATE, chunks=chunks)


def load_model(model: str | os.PathLike[str] | None = None, **kwargs: Any) -> Synthesizer:
    """Load a model directory (default: the shipped one) into a ready Synthesizer."""
    return Synthesizer(model, **kwargs)


def _seconds_up(frames: int) -> float:
    """`frames` mel frames in seconds, rounded up to the hundredth (a duration a refusal can name that is enough)."""
    return math.ceil(frames / FRAMES_PER_SECOND * 100) / 100

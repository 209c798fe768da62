"""Project-wide constants, each defined once.

Audio is 24 kHz mono everywhere inside rtvox (OpenAI's pcm format is 24 kHz too, so the API needs no resampling).
The hop of 256 samples gives 93.75 mel frames per second; HiFi-GAN upsamples by exactly HOP_LENGTH.
"""

from __future__ import annotations

SAMPLE_RATE = 24_000
N_FFT = 1024
WIN_LENGTH = 1024
HOP_LENGTH = 256
N_MELS = 80
TIMBRE_LIMIT = 3.0  # nats: the largest per-band log-mel offset a clone's timbre may carry (rtvox.runtime.timbre)
MEL_FMIN = 0.0
MEL_FMAX = 12_000.0
FRAMES_PER_SECOND = SAMPLE_RATE / HOP_LENGTH

# The shipped model used when none is named (a folder under models/, or $RTVOX_MODELS_DIR).
DEFAULT_MODEL = "rtvox-small"

# Speaker conditioning: GE2E (resemblyzer-compatible) works on 16 kHz audio and gives 256-d unit vectors.
SPEAKER_SAMPLE_RATE = 16_000
SPEAKER_EMBED_DIM = 256

# Emotion label table; index order is part of every model's format, append only.
EMOTIONS: tuple[str, ...] = ("neutral", "happy", "sad", "angry", "surprised", "fearful", "disgusted")

# Request limits.
MAX_INPUT_CHARS = 4096  # as OpenAI's speech API
REF_MIN_SECONDS = 3.0
REF_MAX_SECONDS = 30.0
SPEED_MIN = 0.5
SPEED_MAX = 2.0
EMOTION_ALPHA_MAX = 2.0
MIN_TARGET_SECONDS = 0.2
MAX_TARGET_SECONDS = 120.0
# A target duration may be as short as the text's natural length over this (OpenAI's fastest speed, 4x); shorter
# targets squeeze phonemes out of the audio. (Longer ones are bounded by MAX_TARGET_SECONDS only.)
MAX_DURATION_SQUEEZE = 4.0

# The languages the text frontend reads (a chunk's phonemes are tagged with one of them).
SPOKEN_LANGS: tuple[str, ...] = ("zh", "en")

# Chunking for streaming: a short first chunk so audio starts early, then longer ones.
FIRST_CHUNK_PHONEMES = 48
# ... whose punctuation cut closes at least this many phonemes (~1.5 s of speech): a first chunk of one word gave
# the second too little time to be made (rtvox.text.chunking)
MIN_FIRST_CHUNK_PHONEMES = 20
MAX_CHUNK_PHONEMES = 200
# ... and a service's later-chunk cap where steps are preemptible (the CPU service: rtvox.runtime.preempt), where a
# step's longest stretch without a preemption point is a chunk's decoder pass (global attention over its frames)
PREEMPT_CHUNK_PHONEMES = 96

AUDIO_FORMATS: tuple[str, ...] = ("wav", "flac", "mp3", "opus", "aac", "pcm")

# `rtvox eval --emotion`: sentences per language (per voice, per emotion); 20 keeps one Mandarin character under 0.4
# points of an emotion's error rate (6, the default before 8.7.3, moved a "max change" by several points)
EVAL_EMOTION_SENTENCES = 20

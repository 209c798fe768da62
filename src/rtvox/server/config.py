"""Server settings: one frozen dataclass, filled from `rtvox serve` flags or RTVOX_* environment variables."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from rtvox.constants import FIRST_CHUNK_PHONEMES, MAX_INPUT_CHARS
from rtvox.text.chunking import check_chunk_caps

MIB = 1024 * 1024
DEFAULT_PORT = 8000
# A 30 s reference clip is ~2.9 MB as 24 kHz 16-bit wav, ~1.4 MB at 16 kHz; 10 MiB leaves room for 48 kHz
# stereo wav while keeping a hostile upload cheap to refuse.
DEFAULT_MAX_UPLOAD_BYTES = 10 * MIB
# JSON bodies carry at most two base64 clips (speaker and emotion reference) plus text.
JSON_BODY_OVERHEAD_BYTES = 64 * 1024


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's
MAX_WORKERS = 64


@dataclass(frozen=True)
class ServerConfig:
    """How one rtvox HTTP server runs: where it listens, what it loads, and the limits it enforces."""

    host: str = "127.0.0.1"  # interface to bind; 0.0.0.0 to serve other machines
    port: int = DEFAULT_PORT
    model: str | None = None  # model directory or shipped model name; None → the shipped default
    device: str = "auto"  # auto, cpu, cuda or cuda:N
    backend: str = "auto"  # engine backend; auto: the captured pipeline ("graphs") on a GPU, per module on the CPU
    api_keys: tuple[str, ...] = ()  # accepted Bearer tokens; empty → no authentication
    cors_origins: tuple[str, ...] = ()  # origins allowed by CORS; empty → no CORS headers; "*" → any
    redis_url: str | None = None  # shared embedding cache and cloned-voice table; None → local only
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES  # largest reference clip accepted, encoded bytes
    max_input_chars: int = MAX_INPUT_CHARS  # longest `input`/`text`, as OpenAI's limit
    max_queue: int = 256  # live requests in the runtime before new ones get 429
    max_batch: int | None = None  # chunks per batched engine call; None: 64 on a GPU, 16 on the CPU
    max_wait_ms: float = 10.0  # how long a partial batch waits for company
    deadline_s: float | None = 60.0  # per-request time budget; None → no deadline
    first_chunk_wait_ms: float | None = None  # batch wait of a first chunk; None → 0 on a GPU, max_wait_ms on the CPU
    # most phonemes in a streamed chunk after the first; None → 96 where steps are preempted (CPU), else 200
    max_chunk_phonemes: int | None = None
    first_chunk_phonemes: int = FIRST_CHUNK_PHONEMES  # most phonemes in a stream's first chunk
    # fewest phonemes a first chunk closes at a punctuation cut; None → 20 on the CPU, 0 (no floor) on a GPU
    min_first_chunk_phonemes: int | None = None
    # text frontend worker processes; 0 → one thread in the server process; None → up to 8 on a GPU, 0 on the CPU
    frontend_processes: int | None = None
    # batches queued to the engines at once (2: the next is launched while the device decodes the last); None → 2
    # on a GPU with the captured pipeline, 1 otherwise
    batches_in_flight: int | None = None
    engine_process: bool = False  # the engines in a process of their own (the server's own GIL stays free)
    # first chunks and engine-thread prepares overtake a step in progress at its preemption points (where steps
    # have them: per-module engines in the server process, the CPU service); False: they wait for its end
    preempt_steps: bool = True
    # server processes on one port, each with its own engines, event loop and GIL (uvicorn workers); clones,
    # metrics and (with Redis) embeddings are shared between them; None → the device's default (serve.resolve_workers:
    # 2 on a GPU with the memory for two, else 1)
    workers: int | None = None
    # the captured pipeline's vocoder blocks as fused Triton kernels; None → on where they were measured to pay (a GPU
    # served by two or more workers), off otherwise
    fused_kernels: bool | None = None
    voices_dir: str | None = None  # where clones are kept; None → $RTVOX_VOICES_DIR or the user data dir
    log_level: str = "info"
    model_aliases: tuple[str, ...] = field(
        default=("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
    )  # OpenAI model names accepted as synonyms of the loaded model

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be 1-65535, got {self.port}")
        if self.max_upload_bytes < 1024:
            raise ValueError(f"max_upload_bytes must be at least 1024, got {self.max_upload_bytes}")
        if not 1 <= self.max_input_chars <= MAX_INPUT_CHARS:
            raise ValueError(f"max_input_chars must be 1-{MAX_INPUT_CHARS}, got {self.max_input_chars}")
        first = self.first_chunk_wait_ms
        if first is not None and (not math.isfinite(first) or first < 0):
            raise ValueError(f"first_chunk_wait_ms must be a finite number ≥ 0, got {first}")
        check_chunk_caps(self.max_chunk_phonemes, self.first_chunk_phonemes, self.min_first_chunk_phonemes)
        if self.frontend_processes is not None and self.frontend_processes < 0:
            raise ValueError(f"frontend_processes must be ≥ 0, got {self.frontend_processes}")
        if self.workers is not None and not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be 1-{MAX_WORKERS}, got {self.workers}")
        if self.batches_in_flight is not None and self.batches_in_flight < 1:
            raise ValueError(f"batches_in_flight must be ≥ 1, got {self.batches_in_flight}")
        if self.max_queue < 1 or (self.max_batch is not None and self.max_batch < 1):
            raise ValueError("max_queue and max_batch must be at least 1")
        if not math.isfinite(self.max_wait_ms) or self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be a finite number ≥ 0, got {self.max_wait_ms}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log level {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0 (or unset for none), got {self.deadline_s}")
        if any(not key.strip() for key in self.api_keys):
            raise ValueError("api_keys must not contain empty keys")

    def to_json(self) -> str:
        """The settings as JSON (how `rtvox serve --workers` hands them to its worker processes)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerConfig:
        data = json.loads(text)
        for name in ("api_keys", "cors_origins", "model_aliases"):
            data[name] = tuple(data[name])
        return cls(**data)

    @property
    def max_json_bytes(self) -> int:
        """Largest JSON body: two base64 clips (4/3 of their bytes) and the text."""
        return 2 * (self.max_upload_bytes * 4 // 3 + 4) + JSON_BODY_OVERHEAD_BYTES

    @property
    def max_body_bytes(self) -> int:
        """Largest request body of any kind (multipart uploads and JSON alike)."""
        return max(self.max_json_bytes, self.max_upload_bytes + JSON_BODY_OVERHEAD_BYTES)


def split_list(value: str | None) -> tuple[str, ...]:
    """'a, b,,c' → ('a', 'b', 'c'): how list-valued flags and environment variables are written."""
    if not value:
        return ()
    return tuple(part.strip() for part in value.split(",") if part.strip())

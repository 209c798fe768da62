"""HTTP service: OpenAI-compatible speech API, voice cloning, the native /v1/tts endpoint, metrics and a web page.

Build an app around any SpeechService with `create_app`; `rtvox serve` (serve.py) builds the real one.
"""

from rtvox.server.app import create_app
from rtvox.server.config import ServerConfig
from rtvox.server.protocol import SpeechService

__all__ = ["ServerConfig", "SpeechService", "create_app"]

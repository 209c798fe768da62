"""Run the real app (real TTSService, tiny random model) under uvicorn on a loopback port, in a thread."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import redis
import uvicorn

from rtvox.runtime import Synthesizer
from rtvox.runtime.service import ServiceConfig, TTSService
from rtvox.server import ServerConfig, create_app

REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """uvicorn serving create_app(TTSService(...)) on 127.0.0.1; `url` is its base URL."""

    def __init__(
        self,
        model: Path,
        voices_dir: Path,
        *,
        service: ServiceConfig | None = None,
        **server_config: Any,
    ) -> None:
        synth = Synthesizer(model, device="cpu", voices_dir=voices_dir)
        self.service = TTSService(synth, service or ServiceConfig(fallback_device=None))
        self._setup(create_app(self.service, ServerConfig(**server_config)))

    @classmethod
    def around(cls, app: Any) -> LiveServer:
        """Serve an app built elsewhere (e.g. around a test double of the runtime)."""
        server = cls.__new__(cls)
        server._setup(app)
        return server

    def _setup(self, app: Any) -> None:
        self.app = app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"uvicorn-{self.port}", daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the test server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


class RedisProcess:
    """A throwaway redis-server on a loopback port with no persistence."""

    def __init__(self, workdir: Path) -> None:
        assert REDIS_SERVER is not None, "redis-server not installed (apt-get install -y redis-server)"
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_timeout=0.2, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

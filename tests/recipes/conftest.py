"""Make ``recipes`` importable (the repo root is not on sys.path under --import-mode=importlib)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

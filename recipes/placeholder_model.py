"""Write the untrained placeholder default model (models/rtvox-base) so the pipeline runs offline end to end.

It is replaced by the trained default model (corpus + GPU training recipes). Reproduce with:
    .venv/bin/python recipes/placeholder_model.py models/rtvox-base
"""

from __future__ import annotations

import sys
from pathlib import Path

from rtvox.models.bundle import make_random_bundle
from rtvox.text import Vocabulary

VOICES = {
    "placeholder-female": {"gender": "female", "language": "zh,en", "description": "untrained placeholder"},
    "placeholder-male": {"gender": "male", "language": "zh,en", "description": "untrained placeholder"},
}

CARD = """# rtvox-base (untrained placeholder)

**This model is not trained: its weights are random (seed 0, preset "tiny") and it produces noise, not speech.**
It exists so that `rtvox speak`, `make serve` and the tests run offline end to end with no model flag, using the
real phoneme vocabulary and the real model-directory format. The trained default model replaces it.

- Made by: `.venv/bin/python recipes/placeholder_model.py models/rtvox-base`
- Data: none. Metrics: none (nothing to measure).
"""


def main(out: str) -> None:
    bundle = make_random_bundle(out, preset="tiny", vocab=Vocabulary.default().to_dict(), seed=0, voices=VOICES)
    (Path(out) / "MODEL_CARD.md").write_text(CARD, encoding="utf-8")
    print(f"wrote {bundle.path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "models/rtvox-base")

import json, sys, shutil
from pathlib import Path
import numpy as np, soundfile as sf
for seed, v in enumerate(["mei", "joe"]):
    for k in (1, 2):
        src, dst = Path(f"eager-{v}"), Path(f"eager-{v}-noise{k}")
        if dst.exists(): shutil.rmtree(dst)
        dst.mkdir()
        rng = np.random.default_rng(100 * k + seed)
        lines = []
        for line in (src / "manifest.jsonl").read_text().splitlines():
            item = json.loads(line)
            wav, sr = sf.read(src / Path(item["path"]).name if not (src / item["path"]).exists() else src / item["path"], dtype="float32")
            wav = wav + rng.normal(0, 1e-4, wav.shape).astype(np.float32)
            name = Path(item["path"]).name
            sf.write(dst / name, wav, sr, subtype="PCM_16")
            item["path"] = name
            lines.append(json.dumps(item, ensure_ascii=False))
        (dst / "manifest.jsonl").write_text("\n".join(lines) + "\n")

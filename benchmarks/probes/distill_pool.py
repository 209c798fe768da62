"""Pooled WER/CER of a teacher and its distilled students over every set of their `rtvox eval` JSONs, with a
paired 95 % bootstrap (sentences resampled within each set) of each student minus the teacher.

    python3 benchmarks/probes/distill_pool.py [STUDENT ...]   # eval-STUDENT-{dev,heldout}.json in
    # benchmarks/results/distill/ (default: k3nopost3 k3nopost4 nopost); writes pooled.json there
"""

import json
import random
import sys
from pathlib import Path

R = "benchmarks/results/distill"
models = ["teacher", *(sys.argv[1:] or ["k3nopost3", "k3nopost4", "nopost"])]


def items(n):
    out = {}
    for part in ["dev", "heldout"]:
        d = json.loads(Path(f"{R}/eval-{n}-{part}.json").read_text(encoding="utf-8"))
        for k, v in d["sets"].items():
            lang = v["summary"]["lang"]
            prim = v["summary"]["primary"]
            key = f"{part}:{k}"
            out[key] = (
                lang,
                [(it["metrics"][prim]["errors"], it["metrics"][prim]["reference_length"]) for it in v["items"]],
                v["summary"]["metrics"][prim]["rate"],
            )
    return out


data = {n: items(n) for n in models}
summary = {}
for lang in ["en", "zh", "mixed"]:
    keys = [k for k, (set_lang, _, _) in data["teacher"].items() if set_lang == lang]
    row = {}
    for n in models:
        e = sum(x[0] for k in keys for x in data[n][k][1])
        r = sum(x[1] for k in keys for x in data[n][k][1])
        row[n] = {"rate": round(e / r, 4), "errors": e, "ref": r, "sets": {k: data[n][k][2] for k in keys}}
    # paired bootstrap of student - teacher pooled rate, resampling sentences within each set
    rng = random.Random(0)
    for n in models[1:]:
        diffs = []
        for _ in range(2000):
            et = es = rr = 0
            for k in keys:
                T = data["teacher"][k][1]
                S = data[n][k][1]
                for _i in range(len(T)):
                    j = rng.randrange(len(T))
                    et += T[j][0]
                    es += S[j][0]
                    rr += T[j][1]
            diffs.append((es - et) / rr)
        diffs.sort()
        row[n]["delta_vs_teacher"] = round(row[n]["rate"] - row["teacher"]["rate"], 4)
        row[n]["delta_ci95"] = [round(diffs[50], 4), round(diffs[1949], 4)]
    summary[lang] = row
    print(
        lang,
        {n: (row[n]["rate"], row[n].get("delta_ci95")) for n in models},
        {k: [data[n][k][2] for n in models] for k in keys},
    )
Path(f"{R}/pooled.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")

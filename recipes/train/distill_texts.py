"""Write the texts a decoder distillation reads (`rtvox train distill-decoder --texts FILE`): one sentence per line,
drawn by the corpus's seeded sentence generator (recipes/corpus/texts.py), which refuses every evaluation sentence.

    python -m recipes.train.distill_texts --out /tmp/distill/texts.txt --count 4000 --seed 11
"""

from __future__ import annotations

import argparse
from pathlib import Path

from recipes.corpus.texts import SentenceGenerator

SHARES = (("zh", 0.4), ("en", 0.4), ("mixed", 0.2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    generator = SentenceGenerator(args.seed)
    lines: list[str] = []
    for lang, share in SHARES:
        lines += [generator.sentence(lang, i).text for i in range(round(args.count * share))]
    unique = list(dict.fromkeys(line.replace("\n", " ").strip() for line in lines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(unique) + "\n", encoding="utf-8")
    print(f"{len(unique)} texts ({len(lines) - len(unique)} repeats dropped) -> {args.out}")


if __name__ == "__main__":
    main()

"""Make tests/data/cider_compat/self_cider.json: ruotianluo/cider's ``my_self_cider`` (``Cider``
and ``CiderD``), as self-critical.pytorch's ``get_self_cider_scores`` calls it when
``self_cider_reward_weight > 0``, computed by the public code itself (run from a checkout).

Inputs are the existing fixtures of experiments/make_cider_compat_fixtures.py: the df pickle
``flickr8k-train300-idxs.p`` that prepro_ngrams wrote and the batch's 50 images x 5 sampled
captions (``res_strings``, self-critical's ``array_to_str`` of each sample). Per image, the
reference returns the 5 x 5 matrix of each sample scored against each other sample.

What runs: ruotianluo/cider at e9b736d (self-critical.pytorch's submodule commit), its
``pyciderevalcap/cider`` and ``pyciderevalcap/ciderD`` packages; ``six`` must be importable
(``pip install --target DIR six`` and pass ``--six DIR``).

Run:  python experiments/make_self_cider_fixtures.py --cider /tmp/cider --six /tmp/six
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "data" / "cider_compat"
NAME = "flickr8k-train300-idxs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--cider", type=Path, required=True, help="a ruotianluo/cider checkout (e9b736d)"
    )
    parser.add_argument("--six", type=Path, required=True, help="a folder holding six.py")
    args = parser.parse_args()
    sys.path[:0] = [str(args.six), str(args.cider)]
    from pyciderevalcap.cider.cider import Cider  # type: ignore[import-not-found]
    from pyciderevalcap.ciderD.ciderD import CiderD  # type: ignore[import-not-found]

    batch = json.loads((FIXTURES / "batch.json").read_text())
    k = batch["seq_per_img"]
    samples = batch["res_strings"][: 50 * k]
    groups = [samples[i : i + k] for i in range(0, len(samples), k)]
    out: dict = {
        "made_by": "experiments/make_self_cider_fixtures.py (ruotianluo/cider e9b736d)",
        "df": NAME,
        "res": groups,
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").mkdir()
        with (
            gzip.open(FIXTURES / f"{NAME}.p.gz") as f,
            open(Path(tmp) / "data" / f"{NAME}.p", "wb") as g,
        ):
            shutil.copyfileobj(f, g)
        old = os.getcwd()
        os.chdir(tmp)
        try:
            for key, cls in (("cider", Cider), ("ciderd", CiderD)):
                # self-critical: Cider_scorer.my_self_cider([res[i*seq_per_img:(i+1)*seq_per_img]])
                scorer = cls(df=NAME)
                out[key] = [m.tolist() for m in scorer.my_self_cider(groups)]
                one = scorer.my_self_cider([groups[0]])
                assert one[0].tolist() == out[key][0]
        finally:
            os.chdir(old)
    (FIXTURES / "self_cider.json").write_text(json.dumps(out))
    print("wrote", FIXTURES / "self_cider.json")


if __name__ == "__main__":
    main()

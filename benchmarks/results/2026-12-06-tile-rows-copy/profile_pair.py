"""Two compiled models' in-situ profiles side by side, per step (named by its first node), ms.

    python profile_pair.py OLD.tg NEW.tg
"""

import sys

import numpy as np

import tilegraph as tg


def main(old: str, new: str) -> None:
    models = [tg.load(old), tg.load(new)]
    graph = models[0].graph
    rng = np.random.default_rng(0)
    feeds = {}
    for n in models[0].input_names:
        shape, dtype = graph.type_of(n).shape, str(graph.type_of(n).dtype)
        feeds[n] = (rng.integers(0, 1000, shape).astype(dtype) if "int" in dtype
                    else rng.standard_normal(shape).astype(np.float32))  # token ids, or pixels
    profiles = [{step.nodes[0]: step.seconds for step in m.profile(feeds).steps} for m in models]
    keys = sorted(set(profiles[0]) | set(profiles[1]), key=lambda k: -max(p.get(k, 0.0) for p in profiles))
    for k in keys[:30]:
        a, b = (p.get(k, float("nan")) * 1e3 for p in profiles)
        print(f"{k:40s} {a:7.3f} {b:7.3f}")
    print("(sum of all steps)", *(round(sum(p.values()) * 1e3, 2) for p in profiles))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

import sys, numpy as np, tilegraph as tg, inspect
paths = sys.argv[1:]
models = [tg.load(p) for p in paths]
g = models[0].graph
feeds = {n: np.random.default_rng(0).standard_normal(g.type_of(n).shape).astype(np.float32) for n in models[0].input_names}
profs = []
for m in models:
    p = m.profile(feeds)
    profs.append({tuple(s.nodes)[0] if hasattr(s,'nodes') else s['nodes'][0]: s for s in (p.steps if hasattr(p,'steps') else p['steps'])})
keys = sorted(set(profs[0]) | set(profs[1]), key=lambda k: -max(getattr(pr.get(k), 'seconds', 0) or 0 for pr in profs))
for k in keys[:30]:
    a, b = (getattr(pr.get(k), 'seconds', float('nan')) * 1e3 for pr in profs)
    print(f"{k:40s} {a:7.3f} {b:7.3f}")
print(sum(s.seconds for s in profs[0].values())*1e3, sum(s.seconds for s in profs[1].values())*1e3)

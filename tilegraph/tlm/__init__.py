"""TLM's offline side: the dataset tilegraph makes by tuning a corpus, and the training of the model.

    python -m tilegraph.tlm.dataset --out DIR --time-per-workload S
    python -m tilegraph.tlm.train --data DIR --minutes M --seed 0

The language, the network, the sampler and the strategy live in tilegraph.tune.tlm and
tilegraph.tune.strategy.tlm (tuning needs them); this package sits above the graph level, whose
reference models supply the corpus's layers.
"""

"""The schedule language model (TLM): a language for sketch programs and a transformer that writes them.

    language.py   the tensor language: a sketch program as tokens, and back (no torch needed)
    network.py    the decoder-only transformer (torch: pip install 'tilegraph[tlm]')
    sampler.py    decisions written token by token, illegal values masked by the design space
    objective.py  the speed-weighted loss on decision values (training and online fine-tuning)
    weights.py    the shipped model (weights/tlm.pt + tlm.json) and its version checks

strategy "tlm" (tune/strategy/tlm.py) uses them; tilegraph.tlm makes the dataset and trains the model.
"""

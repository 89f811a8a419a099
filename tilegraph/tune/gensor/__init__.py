"""Gensor-style construction: ETIR states (state.py), moves (transitions.py), the micro-performance
model (perf_model.py), Markov analysis (markov.py), Roller's policy (policy.py) and state -> trace
(to_trace.py). The search strategies live in tilegraph/tune/strategy/gensor.py and roller.py."""

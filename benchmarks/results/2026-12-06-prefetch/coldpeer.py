import statistics
import time

import numpy as np
import torch

torch.set_num_threads(2)
big = np.ones(100 << 20, np.float32)
for M, K, N in [(128, 3072, 768), (128, 768, 3072), (128, 768, 50257)]:
    a = torch.randn(M, K)
    b = torch.randn(K, N)
    # weights prepacked like a linear: use torch.nn.functional.linear with (N,K) weight
    w = b.t().contiguous()
    f = lambda a=a, w=w: torch.nn.functional.linear(a, w)  # noqa: E731
    for _ in range(5):
        f()
    hot = []
    cold = []
    for _ in range(11):
        t = time.perf_counter()
        f()
        hot.append(time.perf_counter() - t)
    for _ in range(9):
        big += 1.0
        t = time.perf_counter()
        f()
        cold.append(time.perf_counter() - t)
    print(f"torch {M}x{K}x{N}: hot {statistics.median(hot) * 1e3:.3f} cold {statistics.median(cold) * 1e3:.3f} ms")

"""Tuning on a Ray cluster: builders as Ray tasks, runners as Ray actors, one driver.

    tg.tune(wl, time_budget=60, cluster="auto")            # a running cluster (`ray start --head`)
    tg.tune(wl, cluster="ray://head:10001")                 # a remote one, through Ray Client
    tg.tune(wl, cluster="local")                            # Ray started in this process, this machine only

The driver (this process) keeps the search, the cost model and the only database writer; the
cluster builds (cluster/builder.py) and measures (cluster/runner.py). A node whose fingerprint
(cluster/fingerprint.py: the target as it resolves there, the tilegraph version) differs from the
driver's is never sent a candidate. Ray is imported only when `cluster` is given (the `ray` extra).
"""

from tilegraph.tune.cluster.connect import ClusterError, Connection, connect
from tilegraph.tune.cluster.fingerprint import node_fingerprint

__all__ = ["ClusterError", "Connection", "connect", "node_fingerprint"]

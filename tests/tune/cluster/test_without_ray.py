"""Without Ray installed: a cluster run is one line naming the extra (exit 2 on the CLI), and a
run without `cluster` never imports Ray."""

import subprocess
import sys

import pytest

import tilegraph as tg
from tests.tune.helpers import matmul_workload
from tilegraph.tune.cluster import ClusterError


def test_cluster_without_ray_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ClusterError, match=r"needs Ray, which is not installed \(pip install 'tilegraph\[ray\]'\)"):
        tg.tune(matmul_workload(8), trials=1, db=str(tmp_path / "t.db"), progress=False, cluster="auto")


def test_cli_without_ray_exits_2(tmp_path):
    code = ("import sys; sys.modules['ray'] = None; from tilegraph.cli.main import main; "
            f"sys.exit(main(['tune', 'matmul:8,8,8', '--trials', '1', '--db', {str(tmp_path / 't.db')!r}, "
            "'--cluster', 'auto']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["tilegraph: error: tuning on a cluster needs Ray, which is not installed "
                     "(pip install 'tilegraph[ray]')"]


def test_tuning_without_cluster_never_imports_ray(tmp_path):
    code = ("import sys, tilegraph as tg; from tests.tune.helpers import matmul_workload; "
            f"tg.tune(matmul_workload(8), trials=1, db={str(tmp_path / 't.db')!r}, progress=False); "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"

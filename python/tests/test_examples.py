"""examples/gpt.py under mpirun: --verify says the run is bitwise its single-process replay, and
the loss falls."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]


@pytest.mark.parametrize("np,strategy", [(2, "lb-asc"), (3, "layerwise")])
def test_gpt_example_verifies_bitwise_and_learns(np, strategy):
    cmd = MPIRUN + ["-np", str(np), sys.executable, os.path.join(ROOT, "examples", "gpt.py"),
                    "--strategy", strategy, "--steps", "21", "--verify"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "bitwise identical to single process: yes" in proc.stdout
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", proc.stdout)]
    assert len(losses) == 3 and losses[0] > 5.0 and losses[-1] < 0.75 * losses[0], proc.stdout

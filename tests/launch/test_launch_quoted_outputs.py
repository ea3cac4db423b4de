"""Every output README.md and the docs quote is what its commands print now, apart from
throughput, seconds and the memory of the machine (docs/quoted_outputs.py)."""

import subprocess
import sys

import pytest
from launch_helpers import ROOT


@pytest.mark.timeout(960)  # the check's own limit, 900 s, and a minute to report it
def test_every_quoted_output_is_what_its_commands_print():
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "quoted_outputs.py"), "--check"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert done.stdout.strip() == "every quoted output is what its commands print"

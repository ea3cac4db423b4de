"""The example under `## Use it from Python` on each strategy's page, and mixed precision's,
runs as its first line says (`# mpiexec -n N python FILE`): exit status 0, and rank 0 alone
prints.

Each rank's stdout goes to a file of its own (a small ``-c`` prelude, then the example as
``__main__``), so a line printed by another rank cannot hide inside rank 0's output."""

import re

import pytest
from launch_helpers import ROOT, run_mpi

PAGES = ["data_parallel", "pipeline", "tensor_parallel", "parameter_server", "hogwild", "easgd",
         "zero", "precision", "experts"]
HEADING = "\n## Use it from Python\n"
LAUNCH = re.compile(r"# mpiexec -n (\d+) python (\w+\.py)\n")
PRELUDE = ("import runpy, sys; from mpi4py import MPI; "
           "sys.stdout = open(f'{sys.argv[1]}.{MPI.COMM_WORLD.rank}', 'w', buffering=1); "
           "runpy.run_path(sys.argv[2], run_name='__main__')")


def examples(page: str) -> list[str]:
    """The python blocks of the page's `## Use it from Python` section."""
    text = (ROOT / "docs" / f"{page}.md").read_text()
    assert text.count(HEADING) == 1, f"docs/{page}.md: no single '{HEADING.strip()}' section"
    section = text.split(HEADING)[1].split("\n## ")[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


@pytest.mark.parametrize("page", PAGES)
def test_use_it_from_python(page, tmp_path):
    blocks = examples(page)
    assert blocks, f"docs/{page}.md: no python block under '{HEADING.strip()}'"
    for code in blocks:
        launch = LAUNCH.match(code)
        assert launch, f"docs/{page}.md: the example's first line is not '# mpiexec -n N python F'"
        ranks, name = int(launch[1]), launch[2]
        assert 2 <= ranks <= 4, f"docs/{page}.md: {name} wants {ranks} ranks"
        script, out = tmp_path / name, tmp_path / "stdout"
        script.write_text(code)
        run = run_mpi(ranks, ["-c", PRELUDE, str(out), str(script)], timeout=60)
        assert run.returncode == 0, f"{name} exited {run.returncode}:\n{run.stderr[-4000:]}"
        printed = [(tmp_path / f"stdout.{r}").read_text() for r in range(ranks)]
        assert printed[0].strip(), f"{name}: rank 0 printed nothing"
        others = {r: text for r, text in enumerate(printed) if r and text}
        assert not others, f"{name}: ranks other than 0 printed {others}"

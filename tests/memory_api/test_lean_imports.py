"""An API worker holds no numpy, scipy, pandas or bm25s (~55 MB of each worker's RSS) until
something other than serving queries needs them: a query, explained and with free text, is
answered in a fresh process and the modules it loaded are listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "scipy", "pandas", "bm25s")

SCRIPT = """
import sys, tempfile
from pathlib import Path

import memory_api.app, memory_cli.serve
from memory_core import db
from memory_core.serve.keys import create_key
from memory_core.serve.schemas import QueryRequest
from memory_core.serve.service import MemoryService
from memory_core.settings import Settings

settings = Settings(data_dir=Path(tempfile.mkdtemp()))
db.upgrade(settings)
engine = db.make_engine(settings)
service = MemoryService(engine=engine, settings=settings)
app = memory_api.app.create_app(service)
who = service.authenticate(create_key(engine=engine, namespace="ns", scopes=["read"])[1])
request = QueryRequest(task_state={"tool": "search"}, query="back off and retry", explain=True)
assert service.query(principal=who, request=request).explain is not None
service.close()
engine.dispose()
print(" ".join(sorted(m for m in %r if m in sys.modules)) or "none")
"""


def test_serving_a_query_loads_no_numpy_scipy_pandas_or_bm25s() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT % (HEAVY,)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "none"

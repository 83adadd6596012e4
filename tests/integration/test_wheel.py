"""What `pip install docdelta` gets: the product, without the test-only servers.

The scripted model server (tests/modelserver) and the llama-server builder
(tests/llamacpp.py) exist to test docdelta; a user's wheel, and the action image built
from it, must not carry them. What production asks a self-hosted model server
(`docdelta.sandbox.upstream_identity`) does ship. Built with pip as a user's install builds it.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_product_and_no_test_server(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("docdelta-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {n: archive.read(n).decode() for n in names if n.endswith(".py")}

    assert not [n for n in names if n.startswith(("docdelta/modelserver/", "docdelta/llm/", "modelserver/"))]
    assert not [n for n, text in sources.items() if "modelserver" in text or "llamacpp" in text]
    # What the wheel's code imports is in the wheel: the production llama-server probe, the demo.
    shipped = {
        "docdelta/sandbox/upstream_identity.py",
        "docdelta/wiring.py",
        "docdelta/_examples/demo/README.md",
    }
    assert shipped <= set(names)
    assert "from docdelta.sandbox.upstream_identity import model_servers" in sources["docdelta/wiring.py"]

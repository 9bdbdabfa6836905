"""Run every benchmark scenario against a fresh real `jupyter lab`; print medians, p90s and ratios.

    bash scripts/bench          # all scenarios
    bash scripts/bench exec_trivial ping
    bash scripts/bench update_cell --YDocExtension.ystore_class=jupyter_server_ydoc.stores.SQLiteYStore
                                # options (--...) go to the server: an A/B of one setting
    bash scripts/bench soak         # the soak (benchmarks/soak.py), about 8 minutes; soak_short: 2
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import scenarios, soak
from jupyter_mcp.testing import LiveServer

HERE = Path(__file__).resolve().parent


async def main(argv: list[str]) -> int:
    selected = [a for a in argv if not a.startswith("--")]
    with tempfile.TemporaryDirectory(prefix="jupyter-mcp-bench-") as tmp:
        server = LiveServer(Path(tmp), args=[a for a in argv if a.startswith("--")]).start()
        try:
            started = time.monotonic()
            print(f"# jupyter-mcp benchmarks, {time.strftime('%Y-%m-%d %H:%M')} on {platform.node()} "
                  f"({platform.machine()}, {platform.python_version()})")
            results = []
            for name, scenario in {**scenarios.ALL, **soak.SCENARIOS}.items():
                if (selected and name not in selected) or (not selected and name in soak.ON_REQUEST):
                    continue
                began = time.monotonic()
                result = await scenario(server)
                results.append(result)
                print(f"{result.line()} [{time.monotonic() - began:.0f} s]", flush=True)
            print(f"# {len(results)} scenarios in {time.monotonic() - started:.0f}s")
            (HERE / "last-run.json").write_text(json.dumps(
                [r.summary() for r in results],
                indent=1))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))

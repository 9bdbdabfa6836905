"""Run charly check steps against a live box, or apply a candy's run steps to one.

    python -m checks check [FILES...] --url http://127.0.0.1:8888 [--home DIR | --container NAME]
    python -m checks apply FILES... --home DIR --ctx DIR
    python -m checks serve charly.yml --home DIR --volume /workspace=DIR --url http://127.0.0.1:PORT

Without FILES, ``check`` runs the candy, the box and every file in checks/. Every file is
validated against charly's schema first (exit status 1 and nothing runs if one is not valid).
One line per check (TAP); ``--json FILE`` also writes a JSON report. Exit status 2 if a check
fails, as ``charly check live``. No token is sent: charly's checks send none, so a box passes
only if its deployment lets them in as it lets its siblings in.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

from checks.runner import Box, apply, check, tap

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = [ROOT / "candy" / "jupyter-mcp" / "charly.yml", ROOT / "charly.yml",
                 *sorted((ROOT / "checks").glob("*.yml"))]


def _box_candy(path: Path) -> dict:
    import yaml

    for entry in yaml.safe_load(path.read_text()).values():
        candy = entry.get("candy") if isinstance(entry, dict) else None
        if isinstance(candy, dict) and candy.get("service"):
            return candy
    raise SystemExit(f"{path} has no candy with a service")


def service_command(path: Path, box: Box, volumes: dict[str, str]) -> str:
    """The box's enabled service, as this machine runs it: its volumes are local folders and
    its port is the published one (what a container engine does with -v and -p)."""
    candy = _box_candy(path)
    service = next(s for s in candy["service"] if s.get("enable", True))
    command = box.substitute(str(service["exec"]))
    for inside, outside in volumes.items():
        command = command.replace(inside, outside)
    for port in candy.get("port", []):
        command = command.replace(f"--port={port}", f"--port={box.ports.get(int(port), port)}")
    return command


def service_env(path: Path, box: Box) -> dict[str, str]:
    candy = _box_candy(path)
    env = {**os.environ, "HOME": box.home or os.environ["HOME"], "USER": box.user}
    env.update({k: str(v) for k, v in (candy.get("env") or {}).items()})
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["check", "apply", "serve"])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--url", default="http://127.0.0.1:8888", help="the box's JupyterLab (its port 8888)")
    parser.add_argument("--home", help="the box user's HOME on this machine (local box)")
    parser.add_argument("--container", help="the box's container name (command/file steps via podman exec)")
    parser.add_argument("--engine", default="podman")
    parser.add_argument("--ctx", help="the folder that stands for /ctx in run steps")
    parser.add_argument("--json", type=Path, help="also write a JSON report here")
    parser.add_argument("--box", type=Path, default=ROOT / "charly.yml",
                        help="check: the box's charly file, whose mcp_provide the mcp steps dial (the image label charly reads)")
    parser.add_argument("--volume", action="append", default=[], help="serve: BOXPATH=DIR, a volume on this machine")
    args = parser.parse_args(argv)
    url = urlsplit(args.url)
    box = Box(home=args.home or ("/root" if args.container and not args.home else None),
              container=args.container, host=url.hostname or "127.0.0.1", ports={8888: url.port or 8888},
              ctx=args.ctx, engine=args.engine)
    if args.container and not args.home:
        box.home = box.shell('printf %s "$HOME"', 30).stdout or "/root"
        box.user = box.shell("id -un", 30).stdout.strip() or "root"
    files = args.files or DEFAULT_FILES
    if args.action == "apply":
        apply(files, box)
        return 0
    if args.action == "serve":
        volumes = dict(v.split("=", 1) for v in args.volume)
        os.execvpe("bash", ["bash", "-c", service_command(files[0], box, volumes)], service_env(files[0], box))
    box.mcp_provide = _box_candy(args.box).get("mcp_provide") or []
    outcomes = asyncio.run(check(files, box))
    print(tap(outcomes), flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    failed = [o for o in outcomes if o.status == "not ok"]
    print(f"# {len(outcomes) - len(failed)}/{len(outcomes)} checks passed", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

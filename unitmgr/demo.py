"""`python -m unitmgr.demo`: one unit's whole life on this machine, printed as it goes.

It makes a throwaway repository with a local bare origin and its own git identity, creates one
unit with the built-in `script` partner (whose executor commits a file and pushes its branch),
shows `unit status --all`, waits for the executor's receipt, and force-dismantles the unit. No
network, no AI CLI. Everything runs through the real `unit` and `pair` commands, with HOME in a
temp dir and no GitHub tokens or lead markers in their environment. `--runner ray` runs a
pair's turn on the second node of a local Ray cluster instead (`unitmgr.demo_ray`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pair.environment import LEAD_MARKERS

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

EXECUTOR_SCRIPT = """\
# The demo's executor: reads its prompt on stdin, does the task, replies on stdout.
cat > /dev/null
printf 'Hello from a unit.\\n' > HELLO.md
git add HELLO.md
git commit -q -m 'Add HELLO.md'
git push -q -u origin HEAD
echo 'Committed and pushed HELLO.md'
"""
DROPPED_PREFIXES = ("GH_", "GITHUB_", "GIT_", "UNITMGR_")


def isolated_environment(home: Path, *, name: str, email: str) -> dict[str, str]:
    """The environment the demo, the tests and the benchmarks run the CLI in.

    This one's bin dir first on PATH, HOME in `home`, its own git identity and no system git
    config; no GitHub tokens, git or unitmgr settings, lead markers or CODEX_HOME from outside.
    """
    lead_markers = {variable for variable, _ in LEAD_MARKERS}
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(DROPPED_PREFIXES) and key not in lead_markers and key != "CODEX_HOME"
    }
    bin_dir = str(Path(sys.executable).parent)
    environment.update(
        HOME=str(home),
        PATH=os.pathsep.join([bin_dir, environment.get("PATH", "/usr/bin:/bin")]),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_COMMITTER_NAME=name,
        GIT_COMMITTER_EMAIL=email,
    )
    return environment


class Demo:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.environment = isolated_environment(
            root / "home", name="unitmgr demo", email="demo@unitmgr.invalid"
        )
        (root / "home").mkdir()

    def say(self, text: str) -> None:
        print(f"\n== {text}", flush=True)

    def run(self, *argv: str, cwd: Path | None = None, show: bool = True) -> str:
        if show:
            print("$ " + " ".join(shlex.quote(part) for part in argv), flush=True)
        completed = subprocess.run(
            list(argv),
            cwd=cwd or self.root,
            env=self.environment,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if completed.stderr.strip() and show:
            for line in completed.stderr.strip().splitlines():
                print(f"  (stderr) {line}")
        if completed.returncode != 0:
            print(completed.stdout)
            raise SystemExit(f"demo step failed ({completed.returncode}): {' '.join(argv)}")
        return completed.stdout

    def json(self, *argv: str) -> Any:
        return json.loads(self.run(*argv))


def _show(document: dict[str, Any], keys: list[str]) -> None:
    for key in keys:
        value: Any = document
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        print(f"  {key}: {json.dumps(value)}")


def main() -> int:
    keep = "--keep" in sys.argv[1:]
    if "ray" in sys.argv[1:] and "--runner" in sys.argv[1:]:
        from unitmgr.demo_ray import main as on_ray  # SPEC 4.3: needs `unitmgr[ray]`

        return on_ray(keep)
    root = Path(tempfile.mkdtemp(prefix="unitmgr-demo-"))
    demo = Demo(root)
    repo, worktree = root / "repo", root / "hello-unit"
    try:
        demo.say("a throwaway repository with a local bare origin")
        demo.run("git", "init", "-q", "--bare", "-b", "main", str(root / "origin.git"))
        demo.run("git", "init", "-q", "-b", "main", str(repo))
        (repo / "README.md").write_text("# demo\n")
        demo.run("git", "-C", str(repo), "add", "README.md", show=False)
        demo.run("git", "-C", str(repo), "commit", "-q", "-m", "initial", show=False)
        demo.run("git", "-C", str(repo), "remote", "add", "origin", str(root / "origin.git"))
        demo.run("git", "-C", str(repo), "push", "-q", "origin", "main")
        task = root / "task.md"
        task.write_text("Add a HELLO.md file greeting the reader, commit it and push the branch.\n")
        executor = root / "executor.sh"
        executor.write_text(EXECUTOR_SCRIPT)

        demo.say("create one unit; its executor is the built-in `script` partner")
        created = demo.json(
            "unit", "create", "--repo", str(repo), "--unit", "hello",
            "--worktree", str(worktree), "--branch", "demo/hello", "--base", "main",
            "--scope", "HELLO.md only", "--validation", "test -f HELLO.md",
            "--lead", "human", "--partner", "script", "--reason", "demo",
            "--task-file", str(task), "--model", f"sh {executor}",
        )  # fmt: skip
        _show(
            created,
            ["status", "unit.lifecycle", "unit.branch", "unit.base_ref", "unit.pair.latest_seq"],
        )

        demo.say("every unit at a glance (lock-free, offline)")
        print(demo.run("unit", "status", "--all", "--repo", str(repo), "--format", "table"))

        demo.say("the executor's receipt for its first turn")
        receipt = demo.json("pair", "wait", "--repo", str(worktree), "--timeout-min", "2")
        _show(receipt, ["seq", "kind", "status", "reply", "seconds", "receipt_file"])
        print(demo.run("git", "-C", str(worktree), "log", "--oneline", "-2"), end="")

        demo.say("dismantle: the work was never merged, so it is abandoned with --force")
        gone = demo.json(
            "unit", "dismantle", "--repo", str(repo), "--unit", "hello", "--force", "hello"
        )
        _show(gone, ["status", "abandoned.head", "abandoned.recover_with", "archive"])
        print("  steps: " + ", ".join(f"{s['step']} ({s['status']})" for s in gone["done"]))
        remaining = demo.run("unit", "list", "--repo", str(repo), show=False)
        print(f"  units left: {len(json.loads(remaining)['units'])}")
        print("\nDone: the unit lived its whole life and left nothing behind.")
        return 0
    finally:
        if keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

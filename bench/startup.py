"""Start-up of every `unit` and `pair` command, as a ratio of `python -c pass` measured in the
same rounds (SPEC 7 revision 3: every command at most 5x; the fast reads — `--help`, `-h`,
`--version`, `unit status --all` and `unit list` on an empty registry — at most 3x, and faster
than the reference's `node unit.mjs list`, which cannot start faster than a bare `node -e 0`).

Each command runs with realistic arguments on a real registry: one unit `u1` made by `unit
create` (partner `script`, its first turn replied), its pair session, and a plain worktree for
`pair init` / `pair end`. A command that changes state changes nothing real (`--dry-run`, a
read), or is repeated in a round so that every round starts where the last began (`pair init`
then `pair end`; `pair send --background` then an untimed wait for its receipt). What needs
GitHub (`intake`, `merge`, `feedback`) is refused `github-not-configured`, and `unit serve` (a
server) a bad `--lock-timeout`: their start-up and their first check. Each round runs the
yardstick and every command once, in turn, so a load that comes and goes hits all of them; the
figures are medians over the rounds. Bytecode caching is on, as in an installed copy. `python
-X importtime` shows where the rest goes. With `BENCH_BEFORE=<another install's bin dir>` every
command is also timed through that install (its `unit`, `pair` and `python`, on the same
registry, in the same rounds) and the table gets a column for it: before and after a change,
measured in one run. `BENCH_ONLY="<label>,<label>"` times only those commands (and the
yardstick): quicker rounds while working on a few of them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from bench.common import environment, ratio_table, rounds_against_yardstick, run, scratch

RUNS = int(os.environ.get("BENCH_RUNS", "25"))
# The fast reads: at most 3x (the rest at most 5x).
FAST = (
    "unit --help", "unit --version", "unit status -h", "unit status --all (empty)",
    "unit list (empty)", "pair --help", "pair --version", "pair send -h",
)  # fmt: skip


def registry(root: Path, env: dict[str, str]) -> tuple[Path, Path, Path]:
    """A repository with unit `u1` (its first turn replied) and a plain worktree `pw`."""
    repo = root / "repo"
    run(["git", "init", "-q", "-b", "main", str(repo)], env, root)
    (repo / "README.md").write_text("bench\n")
    run(["git", "-C", str(repo), "add", "README.md"], env, root)
    run(["git", "-C", str(repo), "commit", "-q", "-m", "initial"], env, root)
    (root / "task.md").write_text("answer briefly\n")
    bin_dir = Path(sys.executable).parent
    run(
        [str(bin_dir / "unit"), "create", "--unit", "u1", "--worktree", str(root / "wt"),
         "--branch", "b1", "--base", "main", "--scope", "bench", "--validation", "true",
         "--lead", "human", "--partner", "script", "--reason", "bench",
         "--task-file", str(root / "task.md"), "--model", "cat > /dev/null; echo done",
         "--repo", str(repo)],
        env, root,
    )  # fmt: skip
    run(
        [str(bin_dir / "pair"), "wait", "--timeout-min", "1", "--repo", str(root / "wt")], env, root
    )
    run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", "pw", str(root / "pw")], env, root)
    return repo, root / "wt", root / "pw"


def commands(root: Path, env: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Every command of a round, in order, and what runs untimed after some of them."""
    bin_dir = Path(sys.executable).parent
    unit, pair = str(bin_dir / "unit"), str(bin_dir / "pair")
    run(["git", "init", "-q", str(root / "empty")], env, root)
    repo, worktree, plain = registry(root, env)
    empty = ["--repo", str(root / "empty")]
    at, u1, pw = (
        ["--repo", str(repo)],
        ["--unit", "u1", "--repo", str(repo)],
        ["--repo", str(plain)],
    )
    wt = ["--repo", str(worktree)]
    task = str(root / "task.md")
    create = [
        "--unit", "u2", "--worktree", str(root / "wt2"), "--branch", "b2", "--base", "main",
        "--scope", "bench", "--validation", "true", "--lead", "human", "--partner", "script",
        "--reason", "bench", "--task-file", task, "--model", "cat", *at, "--dry-run",
    ]  # fmt: skip
    since = "2000-01-01T00:00:00.000Z"  # before u1's first receipt: `wait` answers at once
    timed = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "unit --help": [unit, "--help"],
        "unit --version": [unit, "--version"],
        "unit status -h": [unit, "status", "-h"],
        "unit status --all (empty)": [unit, "status", "--all", *empty],
        "unit list (empty)": [unit, "list", *empty],
        "pair --help": [pair, "--help"],
        "pair --version": [pair, "--version"],
        "pair send -h": [pair, "send", "-h"],
        "unit status --all": [unit, "status", "--all", *at],
        "unit list": [unit, "list", *at],
        "unit create --dry-run": [unit, "create", *create],
        "unit status --unit u1": [unit, "status", *u1],
        "unit dismantle --dry-run (no merged PR)": [unit, "dismantle", *u1, "--dry-run"],
        "unit restaff --dry-run": [
            unit, "restaff", *u1, "--lead", "human", "--partner", "script", "--model", "cat",
            "--reason", "bench", "--dry-run",
        ],
        "unit cancel --dry-run (no turn in flight)": [unit, "cancel", *u1, "--dry-run"],
        "unit addendum --dry-run": [unit, "addendum", *u1, "--text", "more", "--dry-run"],
        "unit scope": [unit, "scope", *u1],
        "unit verify": [unit, "verify", *u1],
        "unit wait --since (a change)": [unit, "wait", *u1, "--since", since],
        "unit intake (no GitHub)": [unit, "intake", "--label", "ready", *at],
        "unit merge --dry-run (no GitHub)": [unit, "merge", *u1, "--head", "0" * 40, "--dry-run"],
        "unit feedback --dry-run (no GitHub)": [unit, "feedback", *u1, "--dry-run"],
        "unit watch --once": [unit, "watch", "--once", *at],
        "unit tail": [unit, "tail", *u1],
        "unit serve (bad --lock-timeout)": [unit, "serve", *at, "--lock-timeout", "x"],
        "unit config": [unit, "config", *at],
        "unit doctor": [unit, "doctor", *at],
        "unit prune --dry-run": [unit, "prune", "--dry-run", *at],
        "unit log": [unit, "log", *u1],
        "unit path": [unit, "path", "u1", *at],
        "unit shell-init bash": [unit, "shell-init", "bash"],
        "pair status": [pair, "status", *wt],
        "pair wait (replied)": [pair, "wait", *wt],
        "pair cancel (no turn in flight)": [pair, "cancel", *wt],
        "pair clear": [pair, "clear", *wt],
        "pair resolve": [pair, "resolve", "--partner", "script", "--model", "cat"],
        "pair init": [pair, "init", "--partner", "script", "--model", "cat", *pw],
        "pair end": [pair, "end", *pw],
        "pair send --background": [
            pair, "send", "--kind", "question", "--body-file", task, "--background", *wt
        ],
        "unit status --unit u1 through Typer": [
            sys.executable, "-m", "unitmgr.cli", "status", *u1
        ],
    }  # fmt: skip
    if shutil.which("node"):
        timed["node -e 0"] = ["node", "-e", "0"]
    only = [label.strip() for label in os.environ.get("BENCH_ONLY", "").split(",") if label.strip()]
    if only:
        unknown = sorted(set(only) - set(timed))
        if unknown:
            raise SystemExit(f"BENCH_ONLY names no command: {unknown}")
        timed = {label: argv for label, argv in timed.items() if label in (*only, "python -c pass")}
    # The turn `pair send --background` started ends before anything else is timed.
    settle = {"pair send --background": [pair, "wait", "--timeout-min", "1", *wt]}
    return timed, settle


BEFORE = " [before]"


def with_before(
    timed: dict[str, list[str]], settle: dict[str, list[str]], before: str
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each command, then the same through the install in `before` (a bin dir)."""
    ours = str(Path(sys.executable).parent)

    def there(argv: list[str]) -> list[str]:
        moved = [
            before + word[len(ours) :] if word.startswith(ours + "/") else word for word in argv
        ]
        return [str(Path(before) / "python"), *moved[1:]] if argv[0] == sys.executable else moved

    both: dict[str, list[str]] = {}
    for label, argv in timed.items():
        both[label] = argv
        if label.startswith(("unit ", "pair ")):
            both[label + BEFORE] = there(argv)
    return both, settle | {label + BEFORE: argv for label, argv in settle.items()}


def measure() -> list[tuple[str, float, float]]:
    root = scratch()
    try:
        (root / "home").mkdir()
        env = environment(root / "home")
        timed, settle = commands(root, env)
        before = os.environ.get("BENCH_BEFORE")
        if before:
            timed, settle = with_before(timed, settle, before)
        return rounds_against_yardstick(timed, env, root, RUNS, settle=settle)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report() -> str:
    rows = measure()
    found = {label: (seconds, ratio) for label, seconds, ratio in rows}
    if not any(label.endswith(BEFORE) for label in found):
        goals = {
            label: 3 if label in FAST else 5
            for label in found
            if label.startswith(("unit ", "pair ")) and not label.endswith("through Typer")
        }
        return ratio_table(rows, goals)
    lines = ["| command | before | after | goal | met |", "|---|---|---|---|---|"]
    for label, (seconds, ratio) in found.items():
        if label.endswith(BEFORE):
            continue
        goal = "" if not label.startswith(("unit ", "pair ")) else "3x" if label in FAST else "5x"
        goal = "" if label.endswith("through Typer") else goal
        met = "" if not goal else "yes" if ratio <= float(goal[:-1]) else "NO"
        earlier = found.get(label + BEFORE)
        then = f"{earlier[0] * 1000:.0f} ms, {earlier[1]:.1f}x" if earlier else ""
        now = f"{seconds * 1000:.0f} ms, {ratio:.1f}x"
        lines.append(f"| `{label}` | {then} | {now} | {goal} | {met} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(f"load average {os.getloadavg()[0]:.1f} before", file=sys.stderr)
    print(report())
    print(f"load average {os.getloadavg()[0]:.1f} after", file=sys.stderr)

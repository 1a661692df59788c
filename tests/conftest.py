"""Shared fixtures: an isolated environment and real git repositories with a bare origin.

Every test runs with HOME in a temp dir, a fixed git identity, no system git config, no GitHub
tokens or lead markers from the outside world, and the venv's `bin` first on PATH, so the real
`unit` and `pair` console scripts are the ones under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests import cli_client as cli_zygote
from tests import ray_cluster
from unitmgr import demo

VENV_BIN = str(Path(sys.executable).parent)


MEMORY_TEMP_MIN_FREE = 4 << 30  # bytes


def _temp_root_in_memory() -> None:
    """Every test's `tmp_path` on tmpfs (`/dev/shm`) when there is one and nothing else was asked
    for: the CLIs fsync each atomic write and its directory (~60 per `unit create`), which costs
    3-15 ms each on a shared disk and nothing in memory. What the tests prove is unchanged;
    passed tests' directories are removed as they finish (`tmp_path_retention_policy`), so the
    memory a run holds stays small."""
    memory = "/dev/shm"
    if "PYTEST_DEBUG_TEMPROOT" in os.environ or "TMPDIR" in os.environ:
        return
    if not (os.path.isdir(memory) and os.access(memory, os.W_OK | os.X_OK)):
        return
    stats = os.statvfs(memory)
    if stats.f_bavail * stats.f_frsize < MEMORY_TEMP_MIN_FREE:
        return  # a container's 64 MB /dev/shm would fill up: stay on disk
    os.environ["PYTEST_DEBUG_TEMPROOT"] = memory  # read by pytest's tmp_path_factory


_temp_root_in_memory()


def _clean_environment(home: Path) -> dict[str, str]:
    return {
        **demo.isolated_environment(home, name="Unit Test", email="unit@test.invalid"),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "UNITMGR_SKIP_GH_AUTH_TOKEN": "1",
        # Tests run as root in a sandbox; Claude Code refuses writable runs for root without it
        # (the refusal itself is tested with it removed: tests/test_partner_cli.py).
        "IS_SANDBOX": "1",
    }


GITHUB_TOKEN = "ghp_" + "T0kenThatMustNeverBePrinted42"
PLANTED_TOKENS = (
    "ghp_" + "PlantedTokenNeverPrinted000",
    "github_pat_" + "PlantedTokenNeverPrinted111",
)
CLI_OUTPUTS: list[str] = []


def _holds(path: Path, needles: list[bytes]) -> bool:
    """Whether the file's bytes hold one of `needles`, reading only its data: a hole (a test's
    2 GiB sparse transcript) reads as zeros and holds none, so it is skipped (SEEK_DATA), not
    read; a file system that cannot tell reports it all as data."""
    overlap = max(len(needle) for needle in needles) - 1
    chunk = 1 << 20
    with open(path, "rb") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                return False
            end = os.lseek(fd, start, os.SEEK_HOLE)
            position = start
            while position < end:
                data = os.pread(fd, min(chunk, end - position) + overlap, position)
                if any(needle in data for needle in needles):
                    return True
                position += chunk
            offset = end
    return False


def _files_holding(root: Path, secrets: tuple[str, ...]) -> list[str]:
    found = []
    needles = [secret.encode() for secret in secrets]
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and _holds(path, needles):
                found.append(str(path))
        except OSError:
            continue
    return found


def on_the_ray_cluster(item: Any) -> bool:
    """A test on the session's two-node cluster: it asks for the `cluster` fixture, or is marked
    `ray_cluster` because it asks for it at run time (`request.getfixturevalue`)."""
    return (
        "cluster" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("ray_cluster") is not None
    )


def long_first(items: list[Any]) -> None:
    """The real-CLI tier first, then the tests on the Ray cluster, then `@pytest.mark.slow` tests,
    then the others, each group in collection order."""

    def rank(item: Any) -> int:
        if item.get_closest_marker("real") is not None:
            return 0
        if on_the_ray_cluster(item):
            return 1  # the Ray group: one worker's long queue, so it starts early
        return 2 if item.get_closest_marker("slow") is not None else 3

    items.sort(key=rank)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every xdist worker sorts the same way, and `-n 3` (`--dist loadgroup`) hands tests out in this
    # order: the long ones (a real-CLI turn takes 10-35 s) start at once, one worker each, and
    # the end of the run is many short tests that the workers share evenly. Long tests last made
    # the run's tail one 15-35 s test on one worker while the others sat idle. (Three workers on
    # two cores: the two long queues wait on CLIs and nodes, and the third fills those waits —
    # measured against `-n 2` on a quiet and a contended host, decisions.md.)
    long_first(items)
    # Two long queues, each on one worker (`--dist loadgroup`, pyproject; xdist hands the
    # biggest group out first): every test on the two-node Ray cluster — one cluster (8 s and
    # 0.9 GB to start) for the run, not one per worker — and the real-CLI tier, so the two
    # latency-bound queues (a real CLI's start-up and hang budgets, a Ray turn's imports) run
    # beside each other and beside short tests, not one worker's real turns beside the other's.
    # xdist 3.8 groups by an `@group` suffix on the test's id, which it writes to `_nodeid` —
    # an attribute pytest 9 no longer reads (its id is `_id`) — so the suffix goes where
    # pytest reads it.
    if getattr(config.option, "loadgroup", False):  # set in xdist workers
        from _pytest.nodeid import coerce_node_id

        for item in items:
            group = _group_of(item)
            if group and "@" not in item.nodeid:
                item._id = coerce_node_id(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]


def _group_of(item: Any) -> str | None:
    if on_the_ray_cluster(item):
        return "ray"
    return "real" if item.get_closest_marker("real") is not None else None


@pytest.fixture(autouse=True)
def planted_tokens(tmp_path: Path, isolated_environment: Path) -> Any:
    """Every test runs with GitHub tokens in its environment; none may ever be written or printed
    (SPEC 8 redaction): after the test, no file under its temp dir and no CLI output holds one."""
    CLI_OUTPUTS.clear()
    yield
    secrets = (*PLANTED_TOKENS, GITHUB_TOKEN)
    leaked = _files_holding(tmp_path, secrets)
    assert not leaked, f"a token was written to {leaked}"
    for output in CLI_OUTPUTS:
        assert not any(secret in output for secret in secrets), "a token was printed"


# The environment pytest was started in. A library a test loads may set variables behind
# monkeypatch's back (`ray.init` sets PYTHONBREAKPOINT in the process): they would pass into every
# later test's environment and, being interpreter settings, make each later CLI call of that
# worker a fresh interpreter instead of a warm fork (tests/cli_client.py) — 0.5 s, not 0.05 s.
OUTSIDE_ENVIRONMENT = frozenset(os.environ)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key in [key for key in os.environ if key not in OUTSIDE_ENVIRONMENT]:
        del os.environ[key]  # left by an earlier test's library, not by its monkeypatch
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
    )
    # Computed before clearing: the outside PATH (and locale, tmp dir, ...) is kept, minus
    # tokens, lead markers and git/unitmgr settings.
    clean = _clean_environment(home)
    for key in list(os.environ):
        monkeypatch.delenv(key)
    for key, value in clean.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GH_TOKEN", PLANTED_TOKENS[0])
    monkeypatch.setenv("GITHUB_TOKEN", PLANTED_TOKENS[1])
    # The warm Ray server's sockets (pair.runners.ray_forkserver): per test, in a short path
    # (a socket's path is at most 107 bytes; tmp_path's can be longer), stopped at its end.
    runtime = Path(tempfile.mkdtemp(prefix="uxr"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    # Off but in tests/test_ray_forkserver.py: each test has its own HOME, so its own secret
    # and server, whose start (importing Ray, ~1.5 CPU-s) no later turn of the test would repay.
    monkeypatch.setenv("UNITMGR_RAY_WARM_SERVER", "0")
    try:
        yield home
    finally:
        _stop_ray_servers(runtime / "unitmgr")
        shutil.rmtree(runtime, ignore_errors=True)


def _stop_ray_servers(directory: Path) -> None:
    """Every warm server of this test: those answering on its sockets, and one started too
    late to have bound its socket yet (found by the runtime directory in its environment)."""
    if not directory.is_dir():
        return
    import psutil

    from pair.runners.ray_warm import stop

    stopped = stop(directory)
    for process in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if "pair.runners.ray_forkserver" not in (process.info["cmdline"] or []):
                continue
            if process.environ().get("XDG_RUNTIME_DIR") == str(directory.parent):
                process.terminate()
                stopped.append(process.pid)
    for pid in stopped:
        wait_until(lambda pid=pid: gone(pid), timeout=10)


T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.02
) -> T:
    """Poll a condition the system under test will make true (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def gone(pid: int) -> bool:
    """Whether a process is dead (a zombie counts: its parent owns it now)."""
    import psutil

    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def git(cwd: Path, *args: str) -> str:
    completed = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def logging_git(tmp_path: Path, repo: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `git` (a wrapper first on PATH) logs each call's argv to the
    returned file, then runs the real one: how a test counts a command's git processes."""
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real = git(repo, "--exec-path")
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real}/git "$@"\n')
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"}, log


def git_verbs(log: Path) -> list[str]:
    """Each logged git call's subcommand (past `-c key=value`, `-C dir`, `--git-dir dir` and
    `--no-optional-locks`)."""
    verbs = []
    for line in log.read_text().splitlines():
        words = line.split()
        index = 0
        while index < len(words) and words[index].startswith("-"):
            index += 2 if words[index] in ("-c", "-C", "--git-dir") else 1
        verbs.append(words[index] if index < len(words) else "")
    return verbs


@dataclass
class Result:
    code: int
    document: Any
    stdout: str
    stderr: str
    argv: tuple[str, ...] = ()  # the command line that ran (program first)

    def __getitem__(self, key: str) -> Any:
        return self.document[key]


def run_cli(
    program: str,
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: bytes | None = None,  # the command's stdin (default /dev/null)
) -> Result:
    environment = dict(os.environ if env is None else env)
    if cli_zygote.serves(program, environment):
        completed = cli_zygote.run(
            program, list(args), cwd=cwd, env=environment, timeout=timeout, input=input
        )
    else:
        completed = cli_zygote.run_fresh(
            program, list(args), cwd=cwd, env=env, timeout=timeout, input=input
        )
    CLI_OUTPUTS.append(completed.stdout + completed.stderr)
    try:
        document = json.loads(completed.stdout) if completed.stdout.strip() else None
    except ValueError:
        document = None
    return Result(
        completed.returncode, document, completed.stdout, completed.stderr, (program, *args)
    )


def _build_repositories(root: Path, *, with_origin: bool) -> None:
    """What every sandbox starts from: `repo` with one commit on `main`, pushed to a bare
    `origin.git` (or no origin)."""
    root.mkdir(parents=True, exist_ok=True)
    repo = root / "repo"
    if with_origin:
        git(root, "init", "-q", "--bare", "origin.git")
        git(root, "clone", "-q", str(root / "origin.git"), "repo")
    else:
        git(root, "init", "-q", "repo")
    (repo / "README.md").write_text("# sandbox\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    if with_origin:
        git(repo, "push", "-q", "origin", "HEAD:main")
        git(repo, "fetch", "-q", "origin")


# Built once per test process and per git setting (7 git processes), then copied into each
# sandbox with its own root written over the template's wherever git recorded the path.
_TEMPLATES: dict[tuple[Any, ...], Path] = {}
_TEMPLATE_DIR: list[Path] = []


def _git_settings() -> tuple[Any, ...]:
    """Everything the repositories built here depend on besides the root they are built in."""
    home = Path(os.environ.get("HOME", "~")).expanduser()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    configs = []
    for path in (home / ".gitconfig", xdg / "git" / "config"):
        configs.append(path.read_text() if path.is_file() else None)
    variables = sorted((key, value) for key, value in os.environ.items() if key.startswith("GIT_"))
    return (*configs, *variables)


def _copy_template(root: Path, *, with_origin: bool) -> None:
    key = (with_origin, *_git_settings())
    template = _TEMPLATES.get(key)
    if template is None:
        if not _TEMPLATE_DIR:
            _TEMPLATE_DIR.append(Path(tempfile.mkdtemp(prefix="unitmgr-sandbox-templates-")))
        template = _TEMPLATE_DIR[0] / f"t{len(_TEMPLATES)}"
        _build_repositories(template, with_origin=with_origin)
        _TEMPLATES[key] = template
    shutil.copytree(template, root, symlinks=True, dirs_exist_ok=True)
    old, new = str(template).encode(), str(root).encode()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and "objects" not in path.parts:
            data = path.read_bytes()
            if old in data:
                path.write_bytes(data.replace(old, new))
    # The index caches each file's inode and ctime, which the copy changed: refreshed now, as a
    # fresh checkout would be, so no later read has git rewrite it.
    git(root / "repo", "update-index", "-q", "--refresh")


def _remove_templates() -> None:
    for directory in _TEMPLATE_DIR:
        shutil.rmtree(directory, ignore_errors=True)
    _TEMPLATE_DIR.clear()
    _TEMPLATES.clear()


class Sandbox:
    """A repository with a bare origin, and helpers that drive the real CLIs against it."""

    def __init__(self, root: Path, *, with_origin: bool = True) -> None:
        self.root = root
        self.repo = root / "repo"
        self.origin = root / "origin.git" if with_origin else None
        _copy_template(root, with_origin=with_origin)
        self.task = root / "task.md"
        self.task.write_text("Add a greeting file.\n")

    @property
    def common_dir(self) -> Path:
        return self.repo / ".git"

    @property
    def registry(self) -> Path:
        return self.common_dir / "orchestrate"

    @property
    def machine_config(self) -> Path:
        """This machine's config file (SPEC 3.16, outside the common dir), its folder made."""
        from unitmgr.config import machine_file

        path = machine_file(self.common_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def unit(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        input: bytes | None = None,
    ) -> Result:
        return run_cli(
            "unit",
            *args,
            "--repo",
            str(self.repo),
            cwd=self.root,
            env=env,
            timeout=timeout,
            input=input,
        )

    def pair(
        self,
        *args: str,
        repo: Path | None = None,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> Result:
        return run_cli(
            "pair", *args, "--repo", str(repo or self.repo), cwd=self.root, timeout=timeout, env=env
        )

    def worktree(self, unit_id: str) -> Path:
        return self.root / "worktrees" / unit_id

    def create_args(self, unit_id: str, **options: str | None) -> list[str]:
        values: dict[str, str | None] = {
            "worktree": str(self.worktree(unit_id)),
            "branch": f"feat/{unit_id}",
            "base": "main",
            "scope": "a greeting file",
            "validation": "test -f GREETING.md",
            "lead": "human",
            "partner": "script",
            "reason": "tests",
            "task-file": str(self.task),
            "model": "cat > /dev/null; echo hello > GREETING.md; echo done",
        }
        values.update({key.replace("_", "-"): value for key, value in options.items()})
        args = ["create", "--unit", unit_id]
        for key, value in values.items():
            if value is not None:
                args += [f"--{key}", value]
        return args

    def create(self, unit_id: str, *extra: str, **options: str | None) -> Result:
        return self.unit(*self.create_args(unit_id, **options), *extra)

    def record(self, unit_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.registry / "units" / f"{unit_id}.json").read_text())
        return data

    def wait_turn(self, unit_id: str) -> dict[str, Any]:
        result = self.pair("wait", "--timeout-min", "1", repo=self.worktree(unit_id))
        assert result.document is not None, result.stdout + result.stderr
        receipt: dict[str, Any] = result.document
        return receipt

    def snapshot(self) -> dict[str, Any]:
        """Everything a refused command must leave untouched."""
        files = sorted(
            str(path.relative_to(self.root))
            for path in self.root.rglob("*")
            if ".git/objects" not in str(path) and "/logs/" not in str(path)
        )
        contents = {}
        if self.registry.exists():
            for path in sorted(self.registry.rglob("*")):
                if path.is_file():
                    contents[str(path)] = path.read_bytes()
        refs = git(self.repo, "for-each-ref")
        worktrees = git(self.repo, "worktree", "list", "--porcelain")
        remote = git(self.repo, "ls-remote", "origin") if self.origin else ""
        return {
            "files": files,
            "contents": contents,
            "refs": refs,
            "worktrees": worktrees,
            "remote": remote,
        }


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "box")
    yield box
    _stop_leftover_turns(box)


@pytest.fixture
def sandbox_without_origin(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path / "local", with_origin=False)
    yield box
    _stop_leftover_turns(box)


def _stop_leftover_turns(box: Sandbox) -> None:
    """Kill processes a failed test may have left running in the sandbox."""
    import psutil

    root = os.path.realpath(box.root)
    for process in psutil.process_iter(["pid", "cwd"]):
        try:
            cwd = process.info["cwd"]
            if cwd and os.path.realpath(cwd).startswith(root) and process.pid != os.getpid():
                process.kill()
        except (psutil.Error, OSError):
            continue


_CLUSTERS: list[ray_cluster.RayCluster] = []  # the one running cluster of this process, if any


@pytest.fixture
def cluster() -> ray_cluster.RayCluster:
    """The real two-node Ray cluster (tests/ray_cluster.py); a skip without Ray. Started by the
    first test that asks, shared by the ones after it, and stopped as soon as the next test
    does not need it (`pytest_runtest_teardown`): an idle cluster's daemons cost CPU the rest
    of the run needs."""
    if not _CLUSTERS:
        _CLUSTERS.append(ray_cluster.start())
    return _CLUSTERS[0]


def _stop_cluster() -> None:
    while _CLUSTERS:
        ray_cluster.stop(_CLUSTERS.pop())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # The Ray tests run one after another (one `loadgroup` queue, ranked together by
    # `long_first`), so the cluster's last user is known here; a later Ray test would start a
    # new one.
    if _CLUSTERS and (nextitem is None or not on_the_ray_cluster(nextitem)):
        _stop_cluster()


def pytest_sessionfinish() -> None:
    _stop_cluster()


@pytest.fixture(scope="session", autouse=True)
def _check_cli_installed() -> Iterator[None]:
    for program in ("unit", "pair"):
        if shutil.which(program, path=VENV_BIN) is None:
            pytest.exit(f"{program} is not installed in {VENV_BIN}: pip install -e '.[test]'")
    yield
    cli_zygote.stop()  # the warm interpreter `run_cli` started, if it did
    _remove_templates()


FAKES = Path(__file__).resolve().parent / "fakes"
FAKE_NAMES = ("claude", "codex", "cursor-agent", "opencode", "grok", "agent-run")


@dataclass
class FakePartners:
    bin_dir: Path
    log_file: Path

    def calls(self, name: str | None = None) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        entries = [json.loads(line) for line in self.log_file.read_text().splitlines()]
        return [entry for entry in entries if name is None or entry["name"] == name]


@pytest.fixture
def fake_partners(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePartners:
    """Fake partner CLIs first on PATH, logging every invocation."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name in FAKE_NAMES:
        script = bin_dir / name
        # `-S`: the fakes need only the standard library, and each start skips site (the venv's
        # .pth files) — ~10 ms of every fake turn.
        script.write_text(
            f"#!{sys.executable} -S\n"
            "import sys\n"
            f"sys.path.insert(0, {str(FAKES)!r})\n"
            "from partner_fake import main\n"
            f"main({name!r})\n"
        )
        script.chmod(0o755)
    log_file = tmp_path / "fake-partners.jsonl"
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_LOG", str(log_file))
    return FakePartners(bin_dir, log_file)


@pytest.fixture
def github(httpserver: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A stateful fake GitHub over real HTTP; the CLI reaches it through PyGithub."""
    import re

    from tests.fakes.github_server import FakeGitHub

    fake = FakeGitHub(base_url=httpserver.url_for("/api/v3"))
    httpserver.expect_request(re.compile(r"^/api/v3/.*")).respond_with_handler(fake.handle)
    httpserver.expect_request("/api/graphql", method="POST").respond_with_handler(
        fake.handle_graphql
    )
    monkeypatch.setenv("GITHUB_API_URL", fake.base_url)
    monkeypatch.setenv("GITHUB_REPOSITORY", fake.repository)
    monkeypatch.setenv("GH_TOKEN", GITHUB_TOKEN)
    return fake


def git_waiting_for_the_first_receipt(sandbox: Sandbox, unit_id: str) -> dict[str, str]:
    """An environment whose `git` is the real one, except that once the unit's first task was
    sent, `git worktree list` (what create runs to describe the unit, right before it reports
    the first turn) waits for that turn's receipt: the turn has ended by then, however busy the
    machine is, so the test is about an already ended turn and never about a race."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True)
    transcripts = sandbox.common_dir / "worktrees" / unit_id / "pair" / "transcripts"
    tools = sandbox.root / "git-tools"
    tools.mkdir()
    wrapper = tools / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "worktree list" ] && [ -e {transcripts}/0001-task-prompt.md ]; then\n'
        "  tries=0\n"
        f"  while [ ! -e {transcripts}/0001-task-receipt.json ] && [ $tries -lt 3000 ]; do\n"
        "    sleep 0.02; tries=$((tries + 1))\n"
        "  done\n"
        "fi\n"
        f'exec {real.stdout.strip()} "$@"\n'
    )
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}


def write_record(sandbox: Sandbox, unit_id: str, *, signed: bool = True, **fields: Any) -> None:
    """A minimal valid unit record, for tests about the registry rather than worktrees.

    `signed`: its signed fields carry the lead's MACs, as if `unit` had written them (SPEC 8);
    `signed=False` writes what an executor could plant."""
    record = {
        "schema_version": 1,
        "unit_id": unit_id,
        "worktree": str(sandbox.root / "worktrees" / unit_id),
        "branch": f"feat/{unit_id}",
        "base": "main",
        "lifecycle": "working",
        "staffing": {"current": {"partner": "script", "model": "cat"}},
        **fields,
    }
    units = sandbox.registry / "units"
    units.mkdir(parents=True, exist_ok=True)
    if signed:
        record["signatures"] = lead_signatures(sandbox, record)
    (units / f"{unit_id}.json").write_text(json.dumps(record))


def lead_signatures(sandbox: Sandbox, document: dict[str, Any]) -> dict[str, str]:
    """The MACs the lead's `unit` would store for `document`'s signed fields (its key is this
    test's, under the temp HOME); {} for a document that is no readable record."""
    try:
        from registry import signing
        from registry.records import RecordUnreadable, decode_record
    except ImportError:  # a unitmgr from before signed fields (the attack tests run on it too)
        return {}
    try:
        record = decode_record(json.dumps(document))
    except (RecordUnreadable, ValueError):
        return {}
    signing.sign_changed(signing.Signer.for_common_dir(sandbox.common_dir), record)
    return dict(record.signatures)

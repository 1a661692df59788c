"""The real-CLI tier (SPEC 4.2): the pinned claude, codex and opencode against our model server.

The CLIs come from the repository's `node_modules/.bin` (installed by `npm ci` from the committed
lock file). Missing, the tier is skipped with a loud reason — unless `UNITMGR_REQUIRE_REAL_CLIS=1`
(`.ci/run`), which makes it fail. Every CLI talks only to the scripted model server on 127.0.0.1:
the proxies point at a dead local port, and telemetry, update checks and error reports are off.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.fakes.model_server import ModelServer

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = REPO_ROOT / "node_modules" / ".bin"
# Read at import: the isolation fixture clears UNITMGR_* from the environment of every test.
REQUIRE_REAL = os.environ.get("UNITMGR_REQUIRE_REAL_CLIS", "").strip() == "1"
BINARIES = {"claude": "claude", "codex": "codex", "opencode": "opencode"}
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused

# What each partner runs on in the tier, and the effort every turn must carry.
# The request `pair init` gets, what it resolves to, and the model every request must name.
MODELS = {
    "claude": "sonnet",  # an alias: the bootstrap's system/init reports the model it runs
    "codex": "latest:luna",  # resolved from codex's own catalog (app-server model/list)
    "opencode": "anthropic/claude-sonnet-4-6",
}
RESOLVED = {
    "claude": "claude-sonnet-5",
    "codex": "gpt-6-luna",  # not the CLI default (gpt-6.2-sol), so a resume without -m shows
    "opencode": "anthropic/claude-sonnet-4-6",
}
WIRE_MODEL = {"claude": "claude-sonnet-5", "codex": "gpt-6-luna", "opencode": "claude-sonnet-4-6"}
# Each CLI's only endpoint (SPEC 4.2: nothing else is called, not even at start-up).
WIRE_PATH = {
    "claude": "/v1/messages?beta=true",
    "codex": "/v1/responses",
    "opencode": "/v1/messages",
}
EFFORT = "low"


def require_binary(partner: str) -> str:
    path = NODE_BIN / BINARIES[partner]
    if path.exists() and os.access(path, os.X_OK):
        return str(path)
    message = (
        f"REAL-CLI TIER NOT RUN: {path} is missing — run `npm ci --no-audit --no-fund` in "
        f"{REPO_ROOT} (the versions are pinned in package-lock.json)"
    )
    if REQUIRE_REAL:
        pytest.fail(message + " — UNITMGR_REQUIRE_REAL_CLIS=1 requires the tier")
    pytest.skip(message)


def wire_effort(call_effort: dict[str, object], api: str) -> object:
    """The effort a request carried: Anthropic `output_config.effort`, OpenAI `reasoning`."""
    if api == "anthropic":
        config = call_effort.get("output_config")
        return config.get("effort") if isinstance(config, dict) else None
    reasoning = call_effort.get("reasoning")
    return reasoning.get("effort") if isinstance(reasoning, dict) else None


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer(reply="done") as server:
        yield server


@pytest.fixture
def real_clis(
    model_server: ModelServer, isolated_environment: Path, monkeypatch: pytest.MonkeyPatch
) -> ModelServer:
    """The pinned CLIs first on PATH, pointed at the model server and nothing else."""
    for partner in BINARIES:
        require_binary(partner)
    home = isolated_environment
    node = shutil.which("node")
    path = [str(NODE_BIN), os.environ["PATH"]]
    if node:
        path.append(str(Path(node).parent))
    settings = {
        "PATH": os.pathsep.join(path),
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "ALL_PROXY": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        # Claude Code
        "ANTHROPIC_BASE_URL": model_server.url,
        "ANTHROPIC_API_KEY": "sk-ant-scripted-dummy",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",  # a 429 ends the turn at once
        "IS_SANDBOX": "1",  # tests run as root; the refusal itself: tests/test_partner_cli.py
        # codex: config.toml below names the provider and its key variable
        "SCRIPTED_OPENAI_API_KEY": "sk-scripted-dummy",
        # opencode
        "OPENCODE_CONFIG": str(home / "opencode.json"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    }
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model_provider = "scripted"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[feedback]\nenabled = false\n"
        '[otel]\nexporter = "none"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{model_server.url}/v1"\n'
        'env_key = "SCRIPTED_OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"  # a 429 ends the turn at once
        "stream_max_retries = 0\n"
    )
    (home / "opencode.json").write_text(
        json.dumps(
            {
                "autoupdate": False,
                "share": "disabled",
                "provider": {"anthropic": {"options": {"baseURL": f"{model_server.url}/v1"}}},
            }
        )
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-scripted-dummy")
    return model_server


def running(pattern: str) -> list[psutil.Process]:
    """Live processes whose command line matches `pattern` (zombies do not count)."""
    found = []
    regex = re.compile(pattern)
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if regex.search(" ".join(process.info["cmdline"] or [])):
                found.append(process)
        except psutil.Error:
            continue
    return found

"""Partner preflight (SPEC 4.1): the CLI answers `--version`, and its `--help` names every flag
the adapter will pass.

The flags are read from the adapter's own command lines (create and resume, writable and
read-only, with a model and an effort), so a flag added to an adapter is checked without a second
list to keep in step. A verified binary is cached in `$XDG_CACHE_HOME/unitmgr/partner-cli.json`
(else `~/.cache/...`) under its real path, size and mtime: a send with an unchanged binary runs
no process at all. This module runs the binary only with `--version` and `--help`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from pair.errors import UsageError
from pair.partners.base import install_line
from registry.atomic import ensure_private_dir, write_text_atomic

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.partners.base import Partner

PROBE_TIMEOUT_SECONDS = 20.0
CACHE_NAME = "partner-cli.json"


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "unitmgr" / CACHE_NAME


def _identity(binary: str) -> str:
    real = os.path.realpath(binary)
    info = os.stat(real)
    return f"{real}|{info.st_size}|{info.st_mtime_ns}"


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(key: str, entry: dict[str, Any]) -> None:
    path = cache_file()
    try:
        ensure_private_dir(path.parent)
        cache = _read_cache()
        cache[key] = entry
        write_text_atomic(path, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # an unwritable cache only costs the next call a --help


def run_probe(
    argv: list[str],
    *,
    environment: dict[str, str] | None = None,
    timeout: float = PROBE_TIMEOUT_SECONDS,
) -> tuple[int | None, str, str]:
    """(exit code, stdout, stderr) of a short read-only CLI call in its own session; the exit
    code is None (and stderr says why) when it could not run or timed out."""
    try:
        completed = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=environment,
            start_new_session=True,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, "", str(error)
    return completed.returncode, completed.stdout, completed.stderr


def names_flag(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def verify(adapter: Partner, binary: str) -> str:
    """The binary's version, once its help names every flag the adapter passes (cached)."""
    try:
        key = _identity(binary)
    except OSError as error:
        raise UsageError(
            "partner-not-installed",
            f"{binary} cannot be read ({error.strerror or error})",
            next_step=install_line(adapter.name, adapter.bin_variable()),
        ) from None
    needed = adapter.flags_by_help()
    cached = _read_cache().get(key)
    if isinstance(cached, dict) and isinstance(cached.get("version"), str):
        verified = set(cached.get("verified_flags") or [])
        if all(set(flags) <= verified for flags in needed.values()):
            return str(cached["version"])
    code, out, err = run_probe([binary, "--version"])
    version = out.strip().splitlines()[0].strip() if out.strip() else ""
    if code != 0 or not version:
        raise UsageError(
            "partner-not-installed",
            f"the {adapter.name} binary could not be verified: cannot run {binary} --version "
            f"({(err.strip() or f'exit {code}')[-300:]})",
            next_step=install_line(adapter.name, adapter.bin_variable()),
        )
    missing: list[str] = []
    verified_flags: set[str] = set()
    for help_argv, flags in needed.items():
        code, out, err = run_probe([binary, *help_argv])
        text = out + "\n" + err
        for flag in flags:
            if names_flag(text, flag):
                verified_flags.add(flag)
            elif flag not in missing:
                missing.append(flag)
    if missing:
        raise UsageError(
            "partner-cli-unsupported",
            f"{binary} ({version}) does not take {', '.join(missing)}, which the {adapter.name} "
            f"adapter passes — verified versions: {', '.join(adapter.verified_versions) or 'none'}",
            detail={
                "missing_flags": missing,
                "version": version,
                "verified_versions": list(adapter.verified_versions),
            },
            next_step=install_line(
                adapter.name, adapter.bin_variable(), tuple(adapter.verified_versions)
            ),
        )
    _remember(key, {"version": version, "verified_flags": sorted(verified_flags)})
    return version

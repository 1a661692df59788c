"""A turn's receipt stays readable and says one thing (SPEC 3.3, 8).

Receipts are read with a 1 MiB bound, so the reply a receipt embeds is cut (the whole reply is
in the turn's `-reply.md`); and `unit create` reports its first turn from one source: the
receipt, never beside a view read before the turn ended that still shows it in flight.
"""

from __future__ import annotations

from pathlib import Path

from pair.receipts import RECEIPT_REPLY_JSON_BYTES
from tests.conftest import Sandbox

REPLY_BYTES = 1_600_000  # over the 1 MiB a receipt may be


def test_a_reply_over_a_mib_leaves_its_receipt_readable(sandbox: Sandbox) -> None:
    model = f"cat > /dev/null; head -c {REPLY_BYTES} /dev/zero | tr '\\0' 'a'"
    init = sandbox.pair("init", "--partner", "script", "--model", model, "--role", "executor")
    assert init.code == 0, init.stdout
    body = sandbox.root / "q.md"
    body.write_text("a long answer, please\n")
    sent = sandbox.pair("send", "--kind", "question", "--body-file", str(body))
    assert sent.code == 0, sent.stdout[:2000]
    assert "unreadable" not in sent.document, sent.stdout[:2000]
    assert sent["status"] == "replied"
    assert sent["reply_truncated"] == {"bytes": REPLY_BYTES, "kept_bytes": len(sent["reply"])}
    assert 0 < len(sent["reply"]) <= RECEIPT_REPLY_JSON_BYTES
    assert Path(sent["reply_file"]).stat().st_size >= REPLY_BYTES  # the whole reply is kept
    status = sandbox.pair("status")
    assert status["latest_receipt"]["status"] == "replied", status.stdout[:2000]


def test_create_reports_its_first_turn_once(sandbox: Sandbox) -> None:
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    observed = created["unit"]["observed"]
    in_flight = observed["pair"]["in_flight"]
    first = created.document.get("first_turn")
    if first is None:  # the turn outlived the create (a loaded machine): it says in flight
        assert in_flight is not None and in_flight["seq"] == 1, created.stdout
        return
    assert first["status"] == "replied"
    assert in_flight is None or in_flight["seq"] != first["seq"], in_flight
    assert observed["latest_receipt"]["status"] == "replied"
    assert observed["pair"]["latest_receipt"]["seq"] == first["seq"]

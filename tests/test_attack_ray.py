"""What the lead copies back from a Ray node is the executor's to write (SPEC 4.3, 8).

The node's turn code redacts the partner's stream, but the executor on the node can append to
the node's transcript file itself (its path is in `PAIR_STATE_DIR`). The lead copies that file
back by byte offset: a token shape written there must not reach the lead's transcript.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import ray_cluster
from tests.conftest import Sandbox

PLANTED = "ghp_" + "NodeTranscriptTokenXyz0123456789abcdef"
# Half the token, then the rest a moment later (split across the lead's chunks); the model
# string itself spells no token shape, or the record would hold it redacted.
MODEL = (
    'cat > /dev/null; for f in "$PAIR_STATE_DIR"/*.log; do '
    f"printf 'before %s%s' gh '{PLANTED[2:20]}' >> \"$f\"; sleep 0.5; "
    f"printf '%s after\\n' '{PLANTED[20:]}' >> \"$f\"; done; echo done"
)


def _ok(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.stdout + result.stderr
    document: dict[str, Any] = result.document
    return document


@pytest.mark.slow
def test_a_token_the_executor_writes_into_the_nodes_transcript_is_redacted_on_the_lead(
    sandbox: Sandbox, cluster: ray_cluster.RayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray_cluster.point_units_at(cluster, sandbox, monkeypatch)
    _ok(sandbox.create("u1", "--runner", "ray", "--node", ray_cluster.NODE, model=MODEL))
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied", receipt
    transcript = Path(receipt["transcript"]).read_text()
    assert "before" in transcript and "after" in transcript, transcript
    assert PLANTED not in transcript and PLANTED[:20] not in transcript, transcript
    _ok(sandbox.unit("dismantle", "--unit", "u1", "--force", "u1"))

"""The scripted model server (tests/fakes/model_server.py) keeps a client's connection, as the
real APIs do: a CLI that sends a turn's next request on the same connection gets an answer."""

from __future__ import annotations

import http.client
import json

from tests.fakes.model_server import ModelServer


def test_two_streamed_answers_arrive_over_one_connection() -> None:
    body = json.dumps(
        {
            "model": "claude-sonnet-5",
            "stream": True,
            "tools": [{"name": "Bash"}],
            "messages": [{"role": "user", "content": "hello"}],
        }
    )
    with ModelServer(reply="done") as server:
        connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
        try:
            for _ in range(2):  # the old fake closed the socket after the first stream
                connection.request(
                    "POST", "/v1/messages", body, {"content-type": "application/json"}
                )
                response = connection.getresponse()
                text = response.read().decode()
                assert response.status == 200
                assert "message_stop" in text, text
        finally:
            connection.close()
    assert len(server.turns()) == 2

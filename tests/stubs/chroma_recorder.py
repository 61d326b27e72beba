"""A host that answers like a Chroma server just enough for its client to send requests, and records them.

It plays the attacker's host in the endpoint tests: an index's manifest may name it, and a test
checks that no request (and so no ``CHROMA_CLIENT_AUTH_CREDENTIALS``) ever reaches it unless the
operator allowed it. It answers the heartbeat and the identity request Chroma's client sends while
it is constructed; anything else gets 404, which is enough: the credentials go with the first ones.
"""

from __future__ import annotations

from tests.stubs._http import Exchange, StubServer

CHROMA_TOKEN_PROVIDER = "chromadb.auth.token_authn.TokenAuthClientProvider"


class ChromaRecorder(StubServer):
    """Records every request; ``authorizations`` are the ``Authorization`` headers it received."""

    def handle(self, exchange: Exchange) -> None:
        path = exchange.request.path.rstrip("/")
        if path.endswith("/heartbeat"):
            exchange.send_json(200, {"nanosecond heartbeat": 1})
        elif path.endswith("/auth/identity"):
            exchange.send_json(200, {"user_id": "", "tenant": "default_tenant", "databases": ["default_database"]})
        else:
            exchange.send_json(404, {"error": "NotFoundError", "message": "no such thing here"})

    @property
    def authorizations(self) -> list[str]:
        return [r.headers["authorization"] for r in self.requests if "authorization" in r.headers]

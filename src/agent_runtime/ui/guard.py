"""Who may read the dashboard and change a run: the token, the session cookie, CSRF.

A :class:`Guard` is made once per server and holds a random key that never leaves the
process, so everything it signs dies with the server:

- **the token** (``--token`` / ``CRASHRESUME_UI_TOKEN``): when set, every page and action
  needs it, as ``Authorization: Bearer TOKEN`` or as the session cookie ``/login`` sets
  after being given it (HttpOnly, SameSite=Strict; its value is an HMAC of the token, never
  the token itself). Without a token the server only listens on loopback (the command
  refuses any other bind address), and the ``Host`` header must name a loopback address,
  so a page of another site that rebinds its DNS name to 127.0.0.1 reads nothing;
- **cross-site requests**: every POST carries a CSRF field, an HMAC of the run and the
  action under the server's key, and is refused when the browser says it came from
  another origin (``Sec-Fetch-Site`` other than same-origin or none, or an ``Origin`` that
  is not this server's).

The checks answer with the reason of a refusal (a sentence) or None; the app turns a
reason into a 403 or 401 page.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

COOKIE = "crashresume_ui"  # the session cookie's name
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
SAME_SITE = frozenset({"same-origin", "none"})  # Sec-Fetch-Site values a POST may carry


def _host_name(host: str) -> str:
    """``127.0.0.1`` of ``127.0.0.1:8000``, ``[::1]`` of ``[::1]:8000``."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


@dataclass(frozen=True)
class Guard:
    """The server's secrets and the checks made of every request."""

    token: str | None = None
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)

    def _sign(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    # -- the token ------------------------------------------------------------------------

    def session(self) -> str:
        """The session cookie's value, for a browser that gave the token."""
        return self._sign(f"session|{self.token}")

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def authenticated(self, cookie: str | None, authorization: str | None) -> bool:
        """Whether a request may read and act: always, when no token is set."""
        if self.token is None:
            return True
        if cookie is not None and hmac.compare_digest(cookie, self.session()):
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(given.strip())

    def host_refusal(self, host: str | None) -> str | None:
        """Without a token, a request must name a loopback host (DNS rebinding)."""
        if self.token is not None:
            return None
        if host is None or _host_name(host).lower() not in LOOPBACK_HOSTS:
            return (
                f"this dashboard answers requests for a loopback address only, not for host "
                f"{host!r}; to serve it elsewhere, start it with a token (--token)"
            )
        return None

    # -- cross-site requests ----------------------------------------------------------------

    def csrf(self, run_id: str, action: str) -> str:
        """The hidden field of a form that ``action``s run ``run_id``."""
        return self._sign(f"csrf|{run_id}|{action}")

    def post_refusal(
        self,
        *,
        run_id: str,
        action: str,
        given: str | None,
        origin: str | None,
        fetch_site: str | None,
        own_origin: str,
    ) -> str | None:
        """Why a POST that would ``action`` run ``run_id`` is refused, or None."""
        if fetch_site is not None and fetch_site not in SAME_SITE:
            return (
                f"refused a cross-site request (Sec-Fetch-Site: {fetch_site}): the actions "
                "are taken from this dashboard's own pages only"
            )
        if origin is not None and origin != own_origin:
            return (
                f"refused a request from origin {origin}: the actions are taken from this "
                f"dashboard's own pages only ({own_origin})"
            )
        if given is None or not hmac.compare_digest(given, self.csrf(run_id, action)):
            return (
                "refused a form without this server's CSRF field (a stale page from an "
                "earlier server, or a request made elsewhere): reload the page and try again"
            )
        return None

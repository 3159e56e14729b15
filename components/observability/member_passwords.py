"""A member's team views password, derived from their vCluster token rather than registered on its own.

HMAC-SHA256 under the member's token, of their login: only who holds the token (or the state that holds it)
can make the password, the password gives nothing of the token back, and each login's differs. It lives as
long as the token: a member removed and added again, or whose token is replaced, gets a new one, as a
RandomPassword would give; and a member costs the stack one registration, their token, not two.
"""

import hashlib
import hmac

PURPOSE = b"gpu-tenancy team views password\x00"
"""Keeps this use of the token apart from any other derived from it."""
LENGTH = 32
"""Hex digits: 128 bits."""


def member_password(token: str, login: str) -> str:
    return hmac.new(token.encode(), PURPOSE + login.encode(), hashlib.sha256).hexdigest()[:LENGTH]

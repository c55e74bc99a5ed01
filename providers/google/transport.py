"""The ``httplib2.Http`` each worker thread sends Google requests through: it says when a request goes out.

Both the API calls (``HttpRequest.execute`` over google-auth-httplib2's ``AuthorizedHttp``) and google-auth's
token refreshes end in this ``Http``'s ``request``, so a request counted here is one handed to the network
(core/model/provider_io.py): a failure before it is calsync's own, never Google's.
"""

from __future__ import annotations

from typing import Any

import httplib2

from calsync.core.model.provider_io import request_sent


class SendingHttp(httplib2.Http):  # type: ignore[misc]
    """``httplib2.Http`` that tells calsync a request goes out (a refused connection included)."""

    def request(self, *args: Any, **kwargs: Any) -> tuple[httplib2.Response, bytes]:
        """``Http.request``, counted."""
        request_sent()
        answer: tuple[httplib2.Response, bytes] = super().request(*args, **kwargs)
        return answer

"""Re-encrypt every stored credential with the newest secret key (``calsync secret-key rotate``).

Batches of accounts in id order, one transaction each, so a run stopped half-way keeps what it did and
the next run resumes; a blob already under the newest key is skipped (idempotent). Each update is a
compare-and-set on the old blob, so credentials replaced meanwhile (``accounts update``) are left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from sqlalchemy import func, select, update

from calsync.core.model.errors import ConfigurationError, SecretKeyMismatch
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.schema import provider_accounts as accounts
from calsync.core.store.schema import webhook_endpoints

CHECK_BATCH = 100  # stored blobs fetched at a time by the start-up check


@dataclass
class RotationReport:
    """What one rotation pass did."""

    accounts_with_credentials: int = 0
    rotated: int = 0
    already_current: int = 0
    changed_meanwhile: int = 0

    def as_json(self) -> dict[str, int]:
        """Printed by ``calsync secret-key rotate``."""
        return asdict(self)


def count_credentials(db: Database) -> int:
    """How many accounts hold stored credentials (a worker without a key refuses to start when any do)."""
    with db.read() as conn:
        return int(conn.execute(select(func.count()).where(accounts.c.credentials.is_not(None))).scalar() or 0)


def require_secret_key(cipher: CredentialCipher, db: Database) -> None:
    """Refuse to start a worker whose keys cannot read what is stored: every job that needs it would wait.

    Refused: no key while accounts hold credentials; keys none of which opens any stored secret (accounts'
    credentials, webhook endpoints' signing secrets): the wrong ``CALSYNC_SECRET_KEY``, e.g. a second
    ``calsync secret-key`` pasted over the first. Keys that open some start the worker: the jobs of an
    account they cannot read are held and said (core/worker/snapshot.py), never dead-lettered for it.
    """
    if not cipher.configured:
        stored = count_credentials(db)
        if stored:
            raise ConfigurationError(
                f"CALSYNC_SECRET_KEY is not set but {stored} account(s) have stored credentials: "
                "set it (or CALSYNC_SECRET_KEYS) before starting a worker"
            )
        return
    tried = 0
    # Accounts' credentials first, then endpoints' secrets, fetched a batch at a time: the check stops at the first
    # blob a key opens.
    with db.read() as conn:
        for column in (accounts.c.credentials, webhook_endpoints.c.secrets):
            blobs = conn.execution_options(yield_per=CHECK_BATCH).execute(select(column).where(column.is_not(None)))
            for blob in blobs.scalars():
                if cipher.opens(blob):
                    return
                tried += 1
    if tried:
        raise SecretKeyMismatch(
            f"CALSYNC_SECRET_KEY (or CALSYNC_SECRET_KEYS) decrypts none of the {tried} stored credentials: it is not "
            "the key they were stored with; set that key (both, newest first, while rotating) before starting a worker"
        )


def rotate_credentials(
    db: Database, cipher: CredentialCipher, *, batch: int, on_progress: Callable[[int], None]
) -> RotationReport:
    """Re-encrypt every credential blob not yet under the newest key; ``on_progress`` gets each batch's size."""
    report = RotationReport(accounts_with_credentials=count_credentials(db))
    after = ""
    while True:
        with db.write() as conn:
            rows = conn.execute(
                select(accounts.c.id, accounts.c.credentials)
                .where(accounts.c.credentials.is_not(None), accounts.c.id > after)
                .order_by(accounts.c.id)
                .limit(batch)
            ).all()
            for account_id, blob in rows:
                if cipher.is_current(blob):
                    report.already_current += 1
                    continue
                done = conn.execute(
                    update(accounts)
                    .where(accounts.c.id == account_id, accounts.c.credentials == blob)
                    .values(credentials=cipher.rotate(blob))
                )
                if done.rowcount:
                    report.rotated += 1
                else:
                    report.changed_meanwhile += 1
        if not rows:
            return report
        after = rows[-1][0]
        on_progress(len(rows))

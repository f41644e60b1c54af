"""An SQL error's message carries no value of the row that failed: it reaches a failed stage's
line, the logs and the Prefect UI, and the error's own cut of a long value leaves a secret
that redaction no longer recognises."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from memory_core.models.trace_span import TraceSpan


def test_a_failed_insert_does_not_quote_the_row(engine) -> None:
    secret = "amqp://guest:" + secrets.token_urlsafe(12) + "@mq.local:5672//" + "x" * 400
    with Session(engine) as s:
        for _ in range(2):  # the same span twice: the unique constraint refuses the second
            s.add(TraceSpan(namespace="n", trace_id="t", span_id="s", span={"note": secret}))
        with pytest.raises(IntegrityError) as err:
            s.commit()
    assert "trace_span" in str(err.value)  # still says what failed
    assert secret[:30] not in str(err.value)

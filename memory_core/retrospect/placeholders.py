"""No placeholder in a lesson: a withheld or redacted value, or a mask, is no value to key on.

The screen replaces a value untrusted text supplied with a placeholder (memory_core.screen),
redaction replaces a secret with `[REDACTED:<kind>]`, and a signature masks numbers as `<n>`.
A precondition comparing an argument with such a text matches no real call, and a step that
shows it tells the agent nothing. So, after the screen: a warning drops the precondition (it
keeps `tool == ...`), any other lesson keyed on one goes, and a step's argument shape or note
shows the value's type instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memory_core.models.card import ActionStep
from memory_core.models.drafts import DraftCard
from memory_core.screen.values import PLACEHOLDER

REDACTED = "[REDACTED:"
# a literal that is nothing but a mask: "<n>", "<value withheld: ...>", "[REDACTED:kind]"
_MASK = re.compile(r"^\s*(?:<[^<>]*>|\[redacted:[^\]]*\])\s*$", re.I)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ARG_PRE = re.compile(r"^(?:has\(|size\()?args\.")
NEUTRAL = "<a value>"


def is_placeholder(value: Any) -> bool:
    """A text that stands for a value: withheld, redacted or masked."""
    if not isinstance(value, str):
        return False
    low = value.casefold()
    return bool(_MASK.match(value)) or PLACEHOLDER in low or REDACTED.casefold() in low


def _carries(expr: str) -> bool:
    low = expr.casefold()
    if PLACEHOLDER in low or REDACTED.casefold() in low:
        return True
    # a mask inside an error signature (`last_error == "... <n> ..."`) is how signatures are
    # compared; only an argument compared with a bare mask keys on a value nobody passes
    return bool(_ARG_PRE.match(expr.strip())) and any(
        _MASK.match(m.group(1)) for m in _LITERAL.finditer(expr)
    )


def _clean(text: str) -> str:
    return re.sub(re.escape(PLACEHOLDER), NEUTRAL, text, flags=re.I)


def _step(step: ActionStep) -> ActionStep:
    params = {
        k: ("<string>" if isinstance(v, str) and PLACEHOLDER in v.casefold() else v)
        for k, v in step.params_template.items()
    }
    return step.model_copy(update={"params_template": params, "note": _clean(step.note or "")})


def without_placeholders(drafts: Sequence[DraftCard]) -> list[DraftCard]:
    """The drafts with no precondition or step carrying a placeholder (see the module)."""
    out = []
    for d in drafts:
        bad = [p for p in d.preconditions if _carries(p)]
        if bad and d.pattern != "pre_call_warning":
            continue
        d.preconditions = [p for p in d.preconditions if p not in bad]
        d.action_sequence = [_step(s) for s in d.action_sequence]
        out.append(d)
    return out

"""Does a text read as an instruction to the agent? Grammar cues, not a list of attack phrases.

A clause is a directive when it tries to change who the agent is or what it obeys (override,
role play), or when it asks for an action (imperative mood, a modal obligation, a polite
request) AND points it somewhere: at the agent itself, at a standing policy ("from now on",
"always", "before any X"), or at a named tool or function with values. Generic advice in an
error ("try again later") is not a directive: it names no tool, no policy and no addressee.
Cues exist for English and a few common languages; every decoded reading of the text is
screened (see decode.readings).
"""

from __future__ import annotations

import re

from memory_core.screen.decode import readings
from memory_core.text_memo import text_memo

_W = r"(?:\s+\S+){0,6}?\s+"  # up to six words between two cues

OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|overrule|bypass|skip|abandon|discard|neglect|drop|"
    r"set\s+aside|pay\s+no\s+(?:attention|heed)\s+to|(?:do\s+not|don'?t|stop)\s+(?:follow|obey|"
    r"apply)(?:ing)?|no\s+longer\s+(?:follow|obey|apply))\b"
    + _W.replace("{0,6}", "{0,8}")
    + r"(?:instructions?|rules?|guidelines?|guidance|prompts?|polic(?:y|ies)|directives?|"
    r"constraints?|orders?|commands?|directions?|restrictions?|safeguards?|context|programming|"
    r"everything\s+(?:above|before|else))\b"
    # es / fr / de / it / pt
    r"|\b(?:ignora|ignore[rz]?|olvida|descarta|oublie[rz]?|ignoriere|ignorier|vergiss|ignorare|"
    r"dimentica|esqueça|esquece)\b.{0,60}\b(?:instrucciones|instructions|consignes|anweisungen|"
    r"regeln|istruzioni|regole|instruções|regras|reglas)\b"
    r"|忽略|无视|忘记.{0,10}(?:指令|指示|规则)",
    re.IGNORECASE,
)
ROLE = re.compile(
    r"\b(?:you\s+are\s+now|you're\s+now|act\s+as\s+(?:an?\s+|the\s+)?\w+|pretend\s+(?:to\s+be|"
    r"you\s+are|that)|role-?play|system\s+prompt|developer\s+mode|jailbreak|dan\s+mode|"
    r"new\s+(?:system\s+)?(?:instructions?|role|persona|directives?)|"
    r"(?:system|assistant|developer)\s*(?::|\]|>)\s*\S|<\s*/?\s*(?:system|instructions?)\s*>|"
    r"\[\s*(?:system|inst)\s*\]|override\s+mode|admin\s+mode)",
    re.IGNORECASE,
)
ADDRESS = re.compile(
    r"\b(?:you|your|yourself|usted|tú|vous|tu|du|sie|ihr|voi|você)\b|你",
    re.IGNORECASE,
)
# the agent named as such (in a conversation between people "you" is the other person)
AGENT = re.compile(
    r"\b(?:(?:the|dear|hey|attention|note\s+(?:to|for))\s+(?:ai\b|assistant|agent|model|llm|bot|"
    r"chatbot|copilot)|ai\s+(?:assistant|agent|model)|language\s+model|llm|assistente|"
    r"asistente|l'assistant|der\s+assistent|agente)\b|助手|智能体",
    re.IGNORECASE,
)
STANDING = re.compile(
    r"(?<!keep\s)(?<!keeps\s)(?<!moving\s)\b(?:from\s+now\s+on|henceforth|hereafter|"
    r"going\s+forward|from\s+here\s+on|from\s+this\s+point\s+on|a\s+partir\s+de\s+ahora|"
    r"de\s+ahora\s+en\s+adelante|d[ée]sormais|dor[ée]navant|ab\s+sofort|von\s+nun\s+an|"
    r"d'ora\s+in\s+poi|a\s+partir\s+de\s+agora)\b|从现在开始|今后",
    re.IGNORECASE,
)
MODAL = re.compile(
    r"\b(?:must|have\s+to|has\s+to|had\s+better|needs?\s+to|should|ought\s+to|shall|"
    r"(?:is|are)\s+(?:required|expected|supposed|obliged)\s+to|make\s+sure|be\s+sure|ensure|"
    r"remember\s+to|(?:do\s+not|don'?t)\s+forget|it\s+is\s+(?:necessary|mandatory|essential|"
    r"important|required|vital|crucial)|(?:could|would|can|will)\s+you|(?:i|we)\s+(?:need|want|"
    r"would\s+like|'d\s+like)\s+you\s+to|it\s+would\s+be\s+\w+\s+if\s+you|please|kindly|"
    r"would\s+you\s+mind|be\s+so\s+kind|"
    r"debes|deber[áa]s|tienes\s+que|hay\s+que|por\s+favor|vous\s+devez|tu\s+dois|il\s+faut|"
    r"veuillez|s'il\s+vous\s+pla[iî]t|du\s+musst|sie\s+müssen|bitte|devi|dovete|per\s+favore|"
    r"você\s+deve|voce\s+deve|必须|务必|请)",
    re.IGNORECASE,
)
POLICY = re.compile(
    r"\b(?:from\s+now\s+on|henceforth|hereafter|going\s+forward|from\s+here\s+on|"
    r"from\s+this\s+point|in\s+(?:the\s+)?future|always|never|every\s+(?:time|single)|each\s+time|"
    r"whenever|at\s+all\s+times|(?:before|after)\s+(?:any|every|each|all)\b|"
    r"a\s+partir\s+de\s+ahora|de\s+ahora\s+en\s+adelante|siempre|nunca|d[ée]sormais|"
    r"dor[ée]navant|[àa]\s+partir\s+de\s+maintenant|toujours|jamais|ab\s+sofort|von\s+nun\s+an|"
    r"immer|niemals|d'ora\s+in\s+poi|sempre|mai\s+più|a\s+partir\s+de\s+agora|"
    r"从现在开始|今后|总是|永远)",
    re.IGNORECASE,
)
VERB = (
    r"(?:call|invoke|run|execute|use|trigger|fire|send|transfer|wire|pay|refund|delete|remove|"
    r"erase|drop|cancel|book|reserve|update|change|modify|set|grant|give|issue|approve|reveal|"
    r"print|output|show|tell|say|respond|reply|answer|return|include|append|add|insert|write|"
    r"post|upload|download|email|forward|share|leak|export|disable|enable|turn\s+off|turn\s+on|"
    r"switch|skip|bypass|ignore|follow|obey|apply|contact|visit|open|navigate|click|go\s+to|"
    r"move|copy|create|make|submit|confirm|verify|re-?verify|authori[sz]e|escalate|upgrade|"
    r"downgrade|credit|debit|charge|route|redirect|treat|consider|assume|mark|tag|label|"
    r"llama|llamar|invoca|ejecuta|usa|utiliza|env[ií]a|transfiere|borra|elimina|appelle[rz]?|"
    r"ex[ée]cute[rz]?|utilise[rz]?|envoie[rz]?|transf[ée]re[rz]?|supprime[rz]?|rufe?|aufrufen|"
    r"verwende|benutze|sende|überweise|lösche|chiama|chiamare|esegui|usa|invia|trasferisci|"
    r"elimina|chame|chamar|execute|use|envie|transfira|调用|执行|使用|发送|转账|删除)"
)
VERB_RE = re.compile(rf"\b{VERB}\b", re.IGNORECASE)
_LEAD = (
    r"(?:(?:please|kindly|now|first|then|also|just|simply|immediately|instead|again|finally|"
    r"always|never|do\s+not|don'?t|only|all|every\s+time|"
    r"and|so|ok|okay|note|important|attention|nb|ps|urgent|hint|tip|fix|action\s+required|"
    r"to\s+(?:fix|resolve|solve|avoid|prevent|handle)\s+(?:this|that|it|the\s+\w+)|"
    r"(?:before|after|when|if|once|whenever|in\s+order\s+to)\b[^,:]{0,60}[,:])\s*[,:!-]?\s*)*"
)
IMPERATIVE = re.compile(rf"^\W*{_LEAD}{VERB}\b", re.IGNORECASE)
# the verb is the subject, not an order: "cancel twice is refused by the API"
_VERB_AS_SUBJECT = re.compile(
    rf"^\W*{VERB}\b(?:\s+[\w'-]+){{0,3}}?\s+(?:is|are|was|were|gets|got|fails|failed|"
    r"succeeds|succeeded|works|worked|returns|returned|(?:has|have)\s+(?:been|no|not))\b",
    re.IGNORECASE,
)
# a tool-like name: snake_case, camelCase, dotted or called with parentheses
TOOL_NAME = re.compile(
    r"\b(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]+)+|\w+\.\w+\(|\w+\s*\()"
)
TOOL_CALL = re.compile(
    rf"\b{VERB}\b.{{0,40}}(?:\b(?:tool|function|endpoint|api|method|action|command)\b|"
    r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\w+\()",
    re.IGNORECASE,
)
# an outside address an order could send data to (exfiltration needs no tool name)
DESTINATION = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+|\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+|\s+[-–—]\s+|(?<=[.!?])(?=[A-Z])|\s*[|•]\s*")


def clauses(text: str) -> list[tuple[str, str]]:
    """(clause, its sentence): sentences and their comma parts (an instruction may follow a
    harmless lead-in)."""
    out: list[tuple[str, str]] = []
    for sentence in _CLAUSE.split(text):
        sentence = sentence.strip()
        if not sentence:
            continue
        out.append((sentence, sentence))
        parts = [p.strip() for p in re.split(r"[,:]\s+|\.\s+", sentence) if p.strip()]
        if len(parts) > 1:
            out.extend((p, sentence) for p in parts)
    return out


def clause_directive(clause: str, sentence: str = "") -> str | None:
    """Why one clause (of `sentence`) reads as an instruction to the agent, or None."""
    sentence = sentence or clause
    if OVERRIDE.search(clause):
        return "asks the agent to drop its instructions"
    if ROLE.search(clause):
        return "tries to change the agent's role or system prompt"
    imperative = bool(IMPERATIVE.search(clause)) and not _VERB_AS_SUBJECT.search(clause)
    asks = imperative or (bool(MODAL.search(clause)) and bool(VERB_RE.search(clause)))
    if not asks:
        if STANDING.search(clause) and (AGENT.search(clause) or TOOL_NAME.search(clause)):
            return "sets a standing policy for the agent"
        if AGENT.search(clause) and TOOL_NAME.search(clause) and POLICY.search(clause):
            return "tells the agent to call a tool"
        return None
    if TOOL_CALL.search(clause):
        return "tells the agent to call a tool"
    if STANDING.search(clause) or (POLICY.search(clause) and TOOL_NAME.search(clause)):
        return "sets a standing rule for the agent"
    if POLICY.search(clause) and TOOL_NAME.search(sentence):
        return "sets a standing rule about a tool"
    if DESTINATION.search(clause):
        return "asks for something to be sent to an outside address"
    if AGENT.search(clause):
        return "addresses the agent with an order"
    return None


@text_memo(4096)
def directive(text: str) -> str | None:
    """Why a text (or any decoded reading of it) reads as an instruction to the agent, or None."""
    read = readings(text)
    for reading in read:
        if STANDING.search(reading) and (AGENT.search(reading) or TOOL_CALL.search(reading)):
            return "sets a standing rule for the agent"
        for clause, sentence in clauses(reading):
            why = clause_directive(clause, sentence)
            if why:
                return why if reading == read[0] else f"{why} (encoded)"
    return None

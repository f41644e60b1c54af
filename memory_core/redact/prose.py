"""A credential stated in prose, in any language: a word for password, passcode, PIN or token
followed, within a few words of the same sentence, by a value.

The value is taken when it is written as one (quoted, or after `:`/`=`/a copula such as
"is", "ist", "lautet", "es", "est", "是", "は") or when its shape is a credential's whatever the
words around it (letters mixed with digits or symbols). PIN-like nouns take numbers only.
In scripts written without spaces (Chinese, Japanese, Korean) a value is the run of other
characters: "我的密码是abc12345" and "パスワードはabc12345です" read as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# words for a secret, by language; lower case (matched case-insensitively)
_PASSWORD_WORDS = """
password passwort kennwort mot-de-passe contraseña contrasena clave senha palavra-passe
wachtwoord lösenord losenord passord adgangskode kodeord salasana hasło haslo heslo jelszó
jelszo parolă parola şifre sifre şifresi sifresi lozinka geslo slaptažodis parole salasõna
пароль пароля паролем паролі κωδικός κωδικος συνθηματικό 密码 密碼 口令 パスワード 비밀번호
암호 סיסמה סיסמא पासवर्ड รหัสผ่าน passphrase passcode passwd pwd contraseñas
"""
_PASSWORD_PHRASES = (
    "mot de passe",
    "palavra passe",
    "parola d'ordine",
    "mật khẩu",
    "mat khau",
    "kata sandi",
    "kata laluan",
    "كلمة المرور",
    "كلمة السر",
    "رمز عبور",
    "код доступа",
    "code d'accès",
    "code d’accès",
    "código de acceso",
    "código de acesso",
    "codice di accesso",
    "clave de acceso",
    "pass word",
    "pass phrase",
)
_TOKEN_WORDS = """
token jeton токен 令牌 トークン 토큰 zugangscode toegangscode apikey api-key api-schlüssel
secret geheimnis 密钥 秘钥 秘密鍵 ключ
"""
_TOKEN_PHRASES = ("api key", "clé api", "clé d'api", "chave de api", "clave de api", "chiave api")
# nouns whose value is a number: a word after them is never the secret
_PIN_WORDS = """
pin pin-code pincode geheimzahl pin-код пин-код пин 暗証番号 验证码 驗證碼 인증번호 otp
"""
_PIN_PHRASES = ("code pin", "código pin", "codice pin", "pin code", "security code", "код пин")

# connecting words after which the next word is the value, whatever its shape
_COPULA_WORDS = """
is was are ist lautet lautete war sind est était es era é è är var er on jest je jer adalah
ialah là: là é: est: ist: to равен равно — - : = => -> 是 为 為 は 는 은 이 가 هي هو היא הוא
now: now set: set was: becomes became reads
"""
_COPULAS = frozenset(_COPULA_WORDS.split())
# words that say something about the secret rather than give it (any language)
_NOT_VALUE_WORDS = """
falsch abgelaufen ungültig ungueltig korrekt richtig neu alt leer vergessen geändert geaendert
incorrect incorrecte expiré expire oublié oublie faux vide nouveau nouvelle changé change
incorrecta incorrecto caducado caducada vacío vacio nueva nuevo olvidada olvidado cambiada
errada errado inválida invalida expirada expirado esquecida vazia nova sbagliata scaduta nuova
vuota fout verlopen nieuw leeg fel gammal ny glemt feil väärä vanha uusi błędne nowe stare
hibás új неверный неправильный новый старый пустой incorrect wrong expired invalid new old
empty forgotten changed reset required missing correct hidden masked redacted protected valid
"""
_NOT_VALUES = frozenset(_NOT_VALUE_WORDS.split())


def _alternation(words: str, phrases: tuple[str, ...]) -> str:
    items = sorted({*words.split(), *phrases}, key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in items)


# a noun not inside a longer word of an alphabet ("passworded", "spinning", "tokenizer");
# scripts written without spaces (Chinese, Japanese) have no such boundary
_LETTER = "_A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_NOUN_BODY = (
    r"(?<!["
    + _LETTER
    + r"])(?:(?P<pin>"
    + _alternation(_PIN_WORDS, _PIN_PHRASES)
    + r")|(?P<pw>(?:"
    + _alternation(_PASSWORD_WORDS, _PASSWORD_PHRASES)
    # inflected: "Şifrem" (my password), "lösenordet" (the password), "passwords"
    + r")["
    + _LETTER
    + r"]{0,4})|(?P<tok>"
    + _alternation(_TOKEN_WORDS, _TOKEN_PHRASES)
    + r"))(?!["
    + _LETTER
    + r"])"
)
# run on the lower-cased text: a case-insensitive scan cost four times as much
_NOUN_LOW = re.compile(_NOUN_BODY)
_NOUN = re.compile("(?i)" + _NOUN_BODY)  # for the few texts whose lower case changes length
# in ASCII text, every noun above holds one of these
_ASCII_HINTS = (
    "pass", "pwd", "pin", "otp", "token", "secret", "key", "code", "clave", "senha", "kennwort",
    "wachtwoord", "losenord", "passord", "adgangskode", "kodeord", "salasana", "haslo", "heslo",
    "jelszo", "parol", "sifre", "lozinka", "geslo", "jeton", "geheim", "mat khau", "kata ",
    "contrasena", "palavra",
)  # fmt: skip
WINDOW = 48  # characters after the noun where its value may stand
_END = re.compile(r"[.!?。！？;\n](?:\s|$)|[\n。！？]")
# a piece of the window: quoted text, a run of printable ASCII, or anything else
_PIECE = re.compile(
    r"""(['"`“‘「『])([^'"`”’」』\n]{4,128})[”’'"`」』]|"""
    r"([^\s\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+)|\S"
)
_LEAD = "\"'`([{<=:"
_TAIL = "\"'`)]}>.,;:"


def _shaped(value: str) -> bool:
    """A credential's shape: letters with digits or symbols, or mixed case inside the word."""
    letters = sum(c.isalpha() for c in value)
    digits = sum(c.isdigit() for c in value)
    symbols = sum(not c.isalnum() for c in value)
    inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    return len(value) >= 6 and letters > 0 and (digits > 0 or symbols > 0 or inner_upper)


def _value_spans(text: str, start: int, kind: str) -> tuple[int, int] | None:
    end = _END.search(text, start, start + WINDOW)
    stop = end.start() if end else min(len(text), start + WINDOW)
    after_copula = False
    # a piece must start inside the sentence; it may run on (a value ending in "!" or ".")
    for n, m in enumerate(_PIECE.finditer(text, start, stop + 256)):
        if n > 6 or m.start() >= stop:
            return None
        raw = m.group(3) or m.group(0)
        if "[REDACTED" in m.group(0):
            return None  # already redacted
        if m.group(2):  # quoted: the value as written
            return m.span(2)
        word = raw.lstrip(_LEAD).rstrip(_TAIL)
        low = word.lower()
        a = m.start() + raw.find(word) if word else m.start()
        if not word or low in _COPULAS or raw in (":", "=", "-", "—"):
            after_copula = True
            continue
        if raw.endswith((":", "=")) and len(word) > 1 and low.rstrip(":=") in _COPULAS:
            after_copula = True
            continue
        if m.group(3) is None:  # a character of a script without spaces: keep looking
            continue
        if low in _NOT_VALUES or word.startswith("[REDACTED"):
            return None
        if kind == "pin":
            if word.isdigit() and 4 <= len(word) <= 12:
                return a, a + len(word)
            continue
        if kind == "tok" and word.isdigit():
            return None  # a count ("token: 2048"), never a token
        if len(word) >= 4 and (_shaped(word) or (after_copula and word.isalnum())):
            return a, a + len(word)
        if raw.endswith((":", "=")):
            after_copula = True
    return None


def prose_spans(text: str, low: str | None = None) -> Iterator[tuple[int, int]]:
    """(start, end) of each credential stated in prose after a word for one, in any language
    (`low`: the text lower-cased, when the caller has it)."""
    low = text.lower() if low is None else low
    if low.isascii() and not any(h in low for h in _ASCII_HINTS):
        return  # most texts: a few substring scans instead of the noun regex
    found = _NOUN_LOW.finditer(low) if len(low) == len(text) else _NOUN.finditer(text)
    for m in found:
        kind = "pin" if m.group("pin") else "tok" if m.group("tok") else "pw"
        span = _value_spans(text, m.end(), kind)
        if span is not None:
            yield span

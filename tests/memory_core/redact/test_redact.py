"""Redaction: every class of secret is caught, the words around it stay, clean data stays."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory_core.redact import MARKER, find_secrets, has_secret, only_redacted, redact
from memory_core.redact.entropy import looks_random
from tests.helpers.data import shared_data_dir

# (text, the secret in it); tokens are made up, in the providers' documented shapes
CAUGHT = [
    ("my favourite password is Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
    ("My password for the airline portal is Sunny$2024day", "Sunny$2024day"),
    ("the pin for my card is 4821", "4821"),
    ("the passcode is 889922, don't share it", "889922"),
    ("pwd is qwerty99", "qwerty99"),
    ("use the password Kq8#zz19 to log in", "Kq8#zz19"),
    ("I changed my password to CAMabij838! yesterday", "CAMabij838!"),
    ("password=hunter2x", "hunter2x"),
    ('{"db_password": "s3cr3t-Pa55"}', "s3cr3t-Pa55"),
    ("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz012345", "sk-abcdefghijklmnopqrstuvwxyz012345"),
    ("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    (
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA",
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA",
    ),
    ("id AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", "ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"),
    (
        "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0abcdefghijkl",
    ),
    ("xoxb-1234567890-abcdefghijKLMN", "xoxb-1234567890-abcdefghijKLMN"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("rk_live_51Hx2AbCdEfGhIjKlMnOp", "rk_live_51Hx2AbCdEfGhIjKlMnOp"),
    ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("Authorization: Bearer a1B2c3D4e5F6g7H8i9J0", "a1B2c3D4e5F6g7H8i9J0"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7",
    ),
    ("connect to postgres://app:Zr9!kd77@db.internal:5432/prod", "Zr9!kd77"),
    ("mongodb+srv://admin:topSecret42@cluster0.example.net/db", "topSecret42"),
    ("the key is Xk9mQ2pL7vR4tW8zN3bY6cH1 keep it", "Xk9mQ2pL7vR4tW8zN3bY6cH1"),
]
# credentials by where they sit and in other languages (general rules, made-up values)
CAUGHT += [
    ("cache at redis://:Vq7Lm2Pz9@cache.internal:6379/0", "Vq7Lm2Pz9"),
    ("amqps://:kite-Runner-88@mq:5671", "kite-Runner-88"),
    ("git push https://x9Yb2Kq7Lm4Np8Rt6Vw@git.example.com/r.git", "x9Yb2Kq7Lm4Np8Rt6Vw"),
    ("mysql -h db -u root -pPlum7Tree db_prod", "Plum7Tree"),
    ("mariadb-dump -uadmin -pW1ndow!sill shop > dump.sql", "W1ndow!sill"),
    ("sshpass -p 'Lime 42 cactus' ssh deploy@10.0.0.4", "Lime 42 cactus"),
    ("redis-cli -h cache -a Orbit99Lamp ping", "Orbit99Lamp"),
    ('mongosh --host m1 -u ops -p "Gr8-Harbor" admin', "Gr8-Harbor"),
    ("sqlcmd -S db -U sa -P Quartz!77 -Q 'select 1'", "Quartz!77"),
    ("ldapsearch -x -D cn=admin -w Fern5Delta -b dc=ex", "Fern5Delta"),
    ("docker login -u bot -p Nimbus42Key registry.example.com", "Nimbus42Key"),
    ("deploy --db-password=Copper9Mill --env prod", "Copper9Mill"),
    ("vault write --token hvx-7Tr33Frog auth/x", "hvx-7Tr33Frog"),
    ("curl -u ops:Saffron81 https://api.example.com", "Saffron81"),
    ("Cookie: sessionid=a81f2c9e7d3b; csrftoken=Qm3Zx8", "a81f2c9e7d3b"),
    ("Set-Cookie: sid=Zk29fQ7vT1mXe3; Path=/; HttpOnly", "Zk29fQ7vT1mXe3"),
    ('{"headers": {"Cookie": "auth=Pa55-Cookie-99"}}', "Pa55-Cookie-99"),
    ("Authorization: Token 8c1f77a0b2e94d35", "8c1f77a0b2e94d35"),
    ("X-Auth-Token: 71bd0e2c44f3a9e8", "71bd0e2c44f3a9e8"),
    ("PRIVATE-TOKEN: Gx7kLq2mN9pR", "Gx7kLq2mN9pR"),
    ("DB_PASSWORD=Walnut47Crane", "Walnut47Crane"),
    ("TWILIO_AUTH_TOKEN: 5f0c1e9a7b3d2c4e6f8a0b1c2d3e4f5a", "5f0c1e9a7b3d2c4e6f8a0b1c2d3e4f5a"),
    ("twilio auth token 5f0c1e9a7b3d2c4e6f8a0b1c2d3e4f5a for sms", "5f0c1e9a7b3d2c4e6"),
    (
        "bot MTI3NjU0MzIxMDk4NzY1NDMyMQ.Gh7kLm.Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7",
        "MTI3NjU0MzIxMDk4NzY1NDMyMQ.Gh7kLm.Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7",
    ),
    ("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", "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"),
    ("dapi0123456789abcdef0123456789abcdef", "dapi0123456789abcdef0123456789abcdef"),
    ("Mein Passwort lautet Sommer2024!", "Sommer2024"),
    ("Das Kennwort ist: eichhörnchen", "eichh"),
    ("Mi contraseña es gatito99", "gatito99"),
    ("mon mot de passe est « soleil42 »", "soleil42"),
    ("A senha do wifi é Praia#2023", "Praia#2023"),
    ("Het wachtwoord is Tulp8Molen", "Tulp8Molen"),
    ("Moje hasło to Krakow!1987", "Krakow!1987"),
    ("Мой пароль: Zvezda77", "Zvezda77"),
    ("Мой пароль — звезда77", "звезда77"),
    ("我的密码是abc12345", "abc12345"),
    ("パスワードはSakura2024です", "Sakura2024"),
    ("제 비밀번호는 Hangang99 입니다", "Hangang99"),
    ("Meine PIN ist 7391", "7391"),
]
CLEAN = [
    "the password is incorrect, please reset it",
    "your pin is ready at the counter",
    "max_tokens: 2048",
    "reservation 4WQ150 for user mia_li_3668, flight HAT136",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "trace 123e4567-e89b-12d3-a456-426614174000",
    "see https://example.com/api/v1/Reservations/XyZ123abcDEF456ghi",
    "call id call_MY94XAcnfHzfAZcVHqt5FRRQ",
    "getReservationDetailsForPassenger2",
    "/home/runner/work/MyProject2024/src/main.py",
    "mysql -u root -p shop_db",  # asks for the password: shop_db is a database
    "ssh -p 2222 deploy@host && mkdir -p /var/run/app",
    "docker run -p 8080:80 nginx",
    "Das Passwort ist falsch, bitte erneut versuchen",
    "mot de passe oublié ?",
    "the token limit is 4096 and max_tokens: 2048",
    "https://example.com/users/jane/profile",
    "Set-Cookie flags: HttpOnly",
    "shipping to the pinned address; the keyboard code was fine",
]


@pytest.mark.parametrize(("text", "secret"), CAUGHT)
def test_each_class_is_caught(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and MARKER in out, out
    assert redact(out) == out  # idempotent: markers are not secrets


def test_the_words_around_a_secret_stay() -> None:
    assert redact("my favourite password is Tr0ub4dor&3xyz") == (
        "my favourite password is [REDACTED:password_in_text]"
    )
    assert redact("postgres://app:Zr9kd77@db:5432/x") == (
        "postgres://app:[REDACTED:connection_string]@db:5432/x"
    )
    assert only_redacted("[REDACTED:password_in_text].") and not only_redacted(
        "db at [REDACTED:x] b"
    )


@pytest.mark.parametrize("text", CLEAN)
def test_ids_words_and_paths_are_left_alone(text: str) -> None:
    assert find_secrets(text) == [], text
    assert not has_secret(text)


def test_random_tokens_are_caught_and_camel_case_is_not() -> None:
    import secrets

    tokens = [secrets.token_urlsafe(30) for _ in range(300)]
    assert sum(looks_random(t) for t in tokens) / len(tokens) >= 0.95
    assert not looks_random("ThisIsAVeryLongCamelCaseIdentifier2")


def _strings(v: Any) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _strings(x)]
    if isinstance(v, list):
        return [s for x in v for s in _strings(x)]
    return []


@pytest.mark.parametrize("path", ["tau-bench-airline/trajectories.json", "locomo/locomo-dev.json"])
def test_no_false_positive_on_the_shared_data(path: str) -> None:
    data = json.loads((shared_data_dir() / path).read_text())
    hits = [(s[:80], find_secrets(s)) for s in _strings(data) if has_secret(s)]
    assert hits == []


def test_redaction_is_memoised_for_short_texts_only_and_answers_the_same() -> None:
    secret = "password: hunter2-Zq9xWv"
    short = f"log in with {secret}"
    long = "filler words here. " * 60 + secret  # over 1,000 chars: computed each time
    before = redact.cache_info()  # type: ignore[attr-defined]
    first, again = redact(short), redact(short)
    assert first == again and MARKER in first and "hunter2" not in first
    mid = redact.cache_info()  # type: ignore[attr-defined]
    assert (mid.misses, mid.hits) == (before.misses + 1, before.hits + 1)
    assert "hunter2" not in redact(long) and MARKER in redact(long)
    after = redact.cache_info()  # type: ignore[attr-defined]
    assert (after.misses, after.hits, after.currsize) == (mid.misses, mid.hits, mid.currsize)
    assert after.maxsize == 16_384

"""Credentials by where they sit: URL user-info, CLI password flags, auth headers and cookies,
environment variables, and provider token formats.

General rules, not one regex per example: a URL's user-info, any command-line flag named for a
secret (and the short flags of the clients whose password flag is a letter), any HTTP header
named for a credential, any upper-case variable named for one, and the documented prefixes of
providers' tokens (one table, one regex).
"""

from __future__ import annotations

import re

from memory_core.redact.patterns import Pattern

# a flag's or header's value: quoted (spaces allowed) or a run of non-space characters;
# the value is group 2
_QUOTED = r"""(?:(['"]))?((?(1)[^'"\n]{1,256}|[^\s"'`,;|&<>]{2,256}))"""


def _q(kind: str, regex: str, hints: tuple[str, ...]) -> Pattern:
    """A flag or header (regex, no groups of its own) followed by its value."""
    return Pattern(kind, re.compile(regex + _QUOTED), 2, hints)


# clients whose password flag is a short letter: (program, flag, attached only). mysql's
# "-p secret" (with a space) asks for the password and names a database; only "-psecret" holds
# one. Long flags of every program are covered by the generic rule below.
_CLIENT_FLAGS = (
    (r"(?:mysql\w*|mariadb[\w-]*)", "p", True),
    (r"sshpass", "p", False),
    (r"redis-cli", "a", False),
    (r"(?:mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport)", "p", False),
    (r"(?:sqlcmd|bcp|osql)", "P", False),
    (r"ldap\w+", "w", False),
    (r"(?:docker|podman|helm|oras|skopeo)\s+(?:\w+\s+)?login", "p", False),
    (r"az\s+login", "p", False),
    (r"(?:rabbitmqctl|cqlsh|influx|vsql|isql|clickhouse-client)", "p", False),
)
_CLIENT_HINTS = (
    "mysql",
    "mariadb",
    "sshpass",
    "redis-cli",
    "mongo",
    "sqlcmd",
    "bcp",
    "osql",
    "ldap",
    "login",
    "rabbitmq",
    "cqlsh",
    "influx",
    "vsql",
    "isql",
    "clickhouse",
)
# the flag after the program on the same command (not past a pipe or a ;)
_CLIENTS = "|".join(
    program + r"(?![\w-])[^\n|;&]{0,200}?\s-" + flag + ("" if attached else r"\s*")
    for program, flag, attached in _CLIENT_FLAGS
)


_SECRET_WORD = (
    r"(?:password|passwd|passphrase|pass|pwd|secret|token|api-?key|access-?key|auth-?key|"
    r"private-?key|client-?secret|credentials?|auth)"
)

PATTERNS: tuple[Pattern, ...] = (
    # scheme://user:password@host, the user possibly empty (redis://:pw@host); only the password
    Pattern(
        "url_credentials",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@\"'<>]{0,64}:([^\s@/\"'<>]{1,128})@"),
        1,
        ("://",),
    ),
    # scheme://token@host: a user-info of one long token with digits is a credential, not a name
    Pattern(
        "url_credentials",
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://((?=[^\s:/@]*\d)[A-Za-z0-9_.~-]{16,128})@"),
        1,
        ("://",),
    ),
    _q("cli_password", r"(?<![\w-])(?:" + _CLIENTS + ")", _CLIENT_HINTS),
    # any long flag named for a secret: --password X, --db-pass=X, --api-key X, --token=X;
    # user:password flags: curl -u / --user, smbclient -U user%pass, openssl -pass pass:X
    _q(
        "cli_password",
        r"(?<![\w-])(?:(?i:--[a-z0-9-]*?" + _SECRET_WORD + r"(?:\s*=\s*|\s+))"
        r"|(?:-u|--user|--proxy-user)\s+[^\s:'\"]{1,64}:|-U\s+[^\s%'\"]{1,64}%"
        r"|-pass(?:in|out)?\s+pass:)",
        ("--", "-u", "-pass"),
    ),
    # Authorization / Proxy-Authorization: the credentials after an optional scheme word
    Pattern(
        "auth_header",
        re.compile(
            r"(?i:\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:[a-z][\w-]{1,30}\s+)?)"
            r"([^\s\"'<>,]{6,512}(?:,\s*[a-z]+=[^\s\"'<>,]+){0,12})"
        ),
        1,
        ("authorization",),
    ),
    # X-Api-Key, X-Auth-Token, Private-Token, Ocp-Apim-Subscription-Key, X-Vault-Token, ...:
    # a hyphenated header name ending in a credential word
    Pattern(
        "auth_header",
        re.compile(
            r"(?i:\b[a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:api-?key|key|token|secret|password|passwd|"
            r"signature|auth|session|credentials?)[\"']?\s*:\s*[\"']?)([^\s\"'<>,;]{6,512})"
        ),
        1,
        ("key", "token", "secret", "pass", "signature", "auth", "session", "credential"),
    ),
    # Cookie: every value; Set-Cookie: the cookie's value (its attributes are not secret)
    Pattern(
        "cookie",
        re.compile(r"(?i:(?<![\w-])cookie[\"']?\s*[:=]\s*[\"']?)([^\n\"'<>]{1,2048})"),
        1,
        ("cookie",),
    ),
    Pattern(
        "cookie",
        re.compile(r"(?i:\bset-cookie[\"']?\s*:\s*[\"']?[^=\s;\"']{1,128}=)([^;\s\"'<>]{1,2048})"),
        1,
        ("set-cookie",),
    ),
    # DB_PASSWORD=..., GITHUB_TOKEN=..., STRIPE_SECRET_KEY: ... (upper-case variables)
    Pattern(
        "env_secret",
        re.compile(
            r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_?(?:PASSWORD|PASSWD|PASS|PWD|SECRET|TOKEN|API_?KEY|"
            r"ACCESS_?KEY|PRIVATE_?KEY|AUTH|CREDENTIALS?|SID)(?:_[A-Z0-9]+)*\s*[:=]\s*[\"']?"
            r"(?!\[REDACTED)([^\s\"'`,;]{4,256})"
        ),
        1,
        ("pass", "pwd", "secret", "token", "key", "auth", "credential", "sid"),
    ),
    # Azure connection strings and SAS signatures
    Pattern(
        "azure_key",
        re.compile(
            r"(?i:\b(?:accountkey|sharedaccesskey|sig)=)([A-Za-z0-9%+/]{30,}(?:={0,2}|(?:%3d){0,2}))"
        ),
        1,
        ("accountkey", "sharedaccesskey", "sig="),
    ),
)

# documented token formats of providers: the whole token goes (kind "provider_token"), each
# with a literal it holds (for reading: one scan of the alternation runs on every text)
_PROVIDER_FORMATS = (
    ("shp", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),  # Shopify
    ("key-", r"key-[0-9a-z]{32}"),  # Mailgun
    ("-us", r"[0-9a-f]{32}-us\d{1,2}"),  # Mailchimp
    ("sq0", r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}"),  # Square
    ("eaaa", r"EAAA[A-Za-z0-9_-]{60}"),  # Square access token
    ("pypi-", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),  # PyPI
    ("_v1_", r"do[opr]_v1_[a-f0-9]{64}"),  # DigitalOcean
    ("dapi", r"dapi[a-f0-9]{32}(?:-\d)?"),  # Databricks
    ("pmak-", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),  # Postman
    ("gl", r"gl(?:sa|c)_[A-Za-z0-9+/_=]{32,}"),  # Grafana
    ("nrak-", r"NRAK-[A-Z0-9]{27}"),  # New Relic
    ("sntr", r"sntr[ysu]s?_[A-Za-z0-9+/=_]{40,}"),  # Sentry
    ("sbp_", r"sbp_[a-f0-9]{40}"),  # Supabase
    ("lin_api_", r"lin_api_[A-Za-z0-9]{40}"),  # Linear
    ("secret_", r"secret_[A-Za-z0-9]{43,}"),  # Notion
    ("ntn_", r"ntn_[A-Za-z0-9]{40,}"),  # Notion
    ("atatt3", r"ATATT3[A-Za-z0-9_=-]{100,}"),  # Atlassian
    ("atbb", r"ATBB[A-Za-z0-9_=.-]{32,}"),  # Bitbucket app password
    ("hv", r"hv[sb]\.[A-Za-z0-9_-]{24,}"),  # HashiCorp Vault
    ("atlasv1", r"[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,}"),  # Terraform Cloud
    ("dp.", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}"),  # Doppler
    ("figd_", r"figd_[A-Za-z0-9_-]{40}"),  # Figma
    ("r8_", r"r8_[A-Za-z0-9]{37}"),  # Replicate
    ("gsk_", r"gsk_[A-Za-z0-9]{48,}"),  # Groq
    ("xai-", r"xai-[A-Za-z0-9]{60,}"),  # xAI
    ("pplx-", r"pplx-[A-Za-z0-9]{40,}"),  # Perplexity
    ("pat", r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}"),  # Airtable
    ("age-secret", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),  # age
    ("sl.", r"sl\.[A-Za-z0-9_-]{130,}"),  # Dropbox
    ("hrku-", r"HRKU-[A-Za-z0-9_-]{60}"),  # Heroku
    ("fo1_", r"fo1_[A-Za-z0-9_-]{43}"),  # Fly.io
    ("pul-", r"pul-[a-f0-9]{40}"),  # Pulumi
    ("shippo_", r"shippo_(?:live|test)_[a-f0-9]{40}"),  # Shippo
    ("xapp-", r"xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]+"),  # Slack app token
    ("sk.eyj", r"sk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}"),  # Mapbox secret
    (":aa", r"\d{8,10}:AA[A-Za-z0-9_-]{33}"),  # Telegram bot
    ("ac", r"AC[0-9a-fA-F]{32}"),  # Twilio account SID
)
_EDGES = r"(?<![A-Za-z0-9_+/-])(?:{})(?![A-Za-z0-9_])"
PROVIDERS: tuple[Pattern, ...] = (
    Pattern(
        "provider_token",
        re.compile(_EDGES.format("|".join(f for _, f in _PROVIDER_FORMATS))),
        0,
        # no hints: the short ones ("ac", "pat", "gl") are in most texts anyway, and looking
        # for each of the others cost more than the scan
        (),
    ),
    # Discord bot tokens: base64 of the bot's id, a timestamp and an HMAC, dot-separated
    Pattern(
        "provider_token",
        re.compile(
            _EDGES.format(r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}")
        ),
        0,
        (".",),
        re.compile(r"[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}"),
    ),
)

"""Find credentials in text and replace each secret value with ``[REDACTED:<pattern>]``.

Pure module: stdlib ``re`` and ``math`` only. ``scrub`` runs on every chunk before it is
stored, indexed or embedded, so the common case (no candidate at all) must cost almost
nothing: every detector sits behind a *gate*, a literal-led check that runs at memory speed,
and the real regexes only run on the few chunks whose gate fires.

Only the secret value is replaced: ``password = "hunter2xyz"`` becomes
``password = "[REDACTED:password-assignment]"``; for PEM blocks the BEGIN/END lines stay.
Scrubbing is idempotent: nothing overlapping an existing marker is reported again.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterator

__all__ = [
    "Finding",
    "Scrubbed",
    "scrub",
    "find_secrets",
    "marker",
    "PATTERN_NAMES",
    "VENDOR_PATTERNS",
    "GENERIC_PATTERNS",
]


@dataclass(frozen=True)
class Finding:
    """One detected secret: which detector, and where its value sits in the scanned text."""

    pattern: str
    line: int  # 1-based line within the scanned text
    start: int  # character offsets of the replaced value in the ORIGINAL text
    end: int


@dataclass(frozen=True)
class Scrubbed:
    """Text with every secret value replaced, and what was replaced."""

    text: str
    findings: tuple[Finding, ...]

    @property
    def counts(self) -> dict[str, int]:
        """Number of findings per pattern name."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.pattern] = out.get(f.pattern, 0) + 1
        return out


VENDOR_PATTERNS: tuple[str, ...] = (
    "openai-api-key",
    "anthropic-api-key",
    "github-token",
    "github-fine-grained-pat",
    "gitlab-token",
    "aws-access-key-id",
    "aws-secret-access-key",
    "google-api-key",
    "slack-token",
    "slack-webhook",
    "stripe-secret-key",
    "stripe-webhook-secret",
    "twilio-api-key",
    "twilio-account-sid",
    "sendgrid-api-key",
    "npm-token",
    "pypi-token",
    "huggingface-token",
    "discord-bot-token",
    "discord-webhook",
    "telegram-bot-token",
    "shopify-token",
    "digitalocean-token",
    "mailgun-api-key",
    "azure-storage-key",
    "azure-shared-access-key",
    "age-secret-key",
)

GENERIC_PATTERNS: tuple[str, ...] = (
    "private-key",
    "openssh-private-key",
    "pgp-private-key",
    "putty-private-key",
    "jwt",
    "bearer-token",
    "basic-auth",
    "authorization-header",
    "db-url-password",
    "url-password",
    "connection-string-password",
    "password-assignment",
    "secret-assignment",
)

PATTERN_NAMES: tuple[str, ...] = VENDOR_PATTERNS + GENERIC_PATTERNS

# When spans overlap, the highest priority names the merged redaction (vendor beats generic).
_PRIORITY: dict[str, int] = {name: 100 for name in VENDOR_PATTERNS}
_PRIORITY.update(
    {
        "anthropic-api-key": 110,  # sk-ant- also looks like an OpenAI key
        "aws-secret-access-key": 95,
        "private-key": 90,
        "openssh-private-key": 90,
        "pgp-private-key": 90,
        "putty-private-key": 90,
        "jwt": 80,
        "basic-auth": 75,
        "db-url-password": 70,
        "url-password": 65,
        "connection-string-password": 60,
        "bearer-token": 55,
        "authorization-header": 50,
        "password-assignment": 40,
        "secret-assignment": 30,
    }
)

_MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(pattern: str) -> str:
    """The text that replaces a secret value found by ``pattern``."""
    return f"[REDACTED:{pattern}]"


# --------------------------------------------------------------------------- value checks

_PLACEHOLDER_RE = re.compile(
    r"""(?ix)
    [<\[{(].*[>\]})]                       # <your-password> [token] {secret} (optional)
    | [$%].*                               # $PASSWORD ${DB_PASS} %s %(pw)s $(cat file)
    | \#\{.*\} | @\w+                      # #{secret} @Password (SQL parameter)
    | [x*.\#_\-•?]+                        # xxxxxxxx ******** ...
    | (?:null|none|nil|true|false|undefined|empty|required|optional|string|str|text
         |value|secret|secrets|password|passwd|pass|pwd|token|key|apikey|changeme|changeit
         |redacted|hidden|masked|example|sample|dummy|test|foo|bar|foobar|abc|abc123
         |admin|root|user|username|guest|default|n/?a)
    | (?-i:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)  # DB_PASSWORD, YOUR_API_KEY (an env var name)
    | [a-z_.\-]*(?:password|passwd|passphrase|secret|token|api[_-]?key|pwd)[a-z_.\-]*  # myPassword, x-auth-token
    | (?:&H|0x)[0-9a-f]+ | -?\d+(?:\.\d+)?  # constants and numbers
    """
)
_PLACEHOLDER_WORD_RE = re.compile(
    r"(?i)your|_here|placeholder|redacted|replace[_-]?me|insert[_-]|changeme|dummy|<|>|\.\.\.|…"
)
_BRACED_GUID_RE = re.compile(r"\{?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\}?")
_PLAIN_WORD_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+")
_CODE_VALUE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|->|::)[A-Za-z_][A-Za-z0-9_]*)+")


def _is_placeholder(value: str) -> bool:
    """True for values that stand for a secret rather than being one."""
    if not value or value.startswith("[REDACTED:"):
        return True
    if _PLACEHOLDER_RE.fullmatch(value) or _PLACEHOLDER_WORD_RE.search(value):
        return True
    if _BRACED_GUID_RE.fullmatch(value) and value.startswith("{"):
        return True
    return len(set(value)) <= 2  # aaaaaaaa, abababab


def _entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    return -sum((c / n) * math.log2(c / n) for c in (value.count(ch) for ch in set(value)))


def _classes(value: str) -> int:
    """How many of lower case, upper case, digit, symbol occur in ``value``."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def _looks_random(value: str) -> bool:
    """True when ``value`` looks like generated key material rather than a word or identifier."""
    n = len(value)
    if n < 16 or not any(c.isdigit() for c in value):
        return False
    if re.fullmatch(r"[0-9a-fA-F-]+", value):
        # hex: hashes and GUIDs are common in docs; a hex token must be long and not a GUID
        return n >= 32 and not _BRACED_GUID_RE.fullmatch(value) and _entropy(value) >= 3.0
    return _classes(value) >= 3 and _entropy(value) >= (3.2 if n < 24 else 3.5)


def _vendor_ok(body: str) -> bool:
    """Reject vendor-shaped placeholders such as ``ghp_xxxxxxxx...`` or ``AKIA0000...``."""
    if not body:
        return False
    top = max(body.count(ch) for ch in set(body))
    return top / len(body) < 0.5 and not _PLACEHOLDER_WORD_RE.search(body)


# --------------------------------------------------------------------------- gates

# One pass over the raw text finds every vendor/format anchor. Each alternative starts on a
# fairly rare character (a few per 1,000) so the regex engine skips most positions at once;
# this single pass replaces ~20 separate substring scans. No named groups: they disable that
# skip (measured 17 s instead of 0.7 s on win32-17k); the first character names the gate.
_ANCHOR_RE = re.compile(
    r"(?:_(?:(?<=ghp_)|(?<=gho_)|(?<=ghu_)|(?<=ghs_)|(?<=ghr_)|(?<=_pat_)|(?<=k_live_)"
    r"|(?<=k_test_)|(?<=npm_)|(?<=hf_)|(?<=shpat_)|(?<=shpss_)|(?<=shpca_)|(?<=shppa_)"
    r"|(?<=_v1_)|(?<=whsec_)))"
    r"|(?:k-(?<=sk-))"
    r"|(?:key-)"
    r"|(?:gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas)-)"
    r"|(?:A(?:KIA|SIA|BIA|CCA|Iza|C[0-9a-f]{32}|GE-SECRET-KEY-1|ccountKey=))"
    r"|(?:S(?:K[0-9a-fA-F]{32}|G\.|haredAccessKey=))"
    r"|(?:x(?:ox[abposre]-|app-))"
    r"|(?:pypi-)"
    r"|(?:\.(?:[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}|slack\.com/|com/api/webhooks/))"
    r"|(?::[A-Za-z0-9_-]{35})"
    r"|(?:J(?<=eyJ))"
    r"|(?:BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY)"
    r"|(?:Private-Lines:)"
    r"|(?:@)"
)

_ANCHOR_GATE: dict[str, str] = {
    "_": "u", "g": "gl", "A": "A", "S": "S", "x": "xox", "p": "pypi", ".": "dot",
    ":": "colon", "J": "eyJ", "B": "BEGIN", "P": "putty", "@": "url",
}


def _anchor_gate(found: str) -> str:
    """Gate name for one ``_ANCHOR_RE`` match."""
    if found[0] == "k":
        return "sk" if found[1] == "-" else "mailgun"
    return _ANCHOR_GATE[found[0]]


# Case-insensitive gates, checked on a lower-cased copy with plain substring search.
_LOW_GATES: dict[str, tuple[str, ...]] = {
    "bearer": ("bearer",),
    "basic": ("basic",),
    "authorization": ("authorization",),
}
# Name keywords for assignments; only the keywords present in a chunk get their regex run.
_ASSIGN_KEYWORDS: tuple[str, ...] = ("pass", "pw", "secret", "token", "key", "cred")


# --------------------------------------------------------------------------- regex rules

_Hit = tuple[int, int, str]  # start, end, pattern


@dataclass(frozen=True)
class _Rule:
    """A regex detector: ``group`` holds the secret value; ``check`` vets it."""

    name: str
    gate: str
    regex: re.Pattern[str]
    group: int = 0
    check: Callable[[str], bool] | None = None
    edge: bool = False  # the match must start a token (checked here, not by a slow leading lookbehind)


def _r(
    name: str, gate: str, pattern: str, group: int = 0, check: Callable[[str], bool] | None = None, edge: bool = False
) -> _Rule:
    return _Rule(name, gate, re.compile(pattern), group, check, edge)


_B = r"(?<![A-Za-z0-9_-])"  # token start
_E = r"(?![A-Za-z0-9_-])"  # token end


def _after_prefix(value: str) -> bool:
    """Vendor check on the part after the prefix (up to the first ``_`` or ``-``)."""
    cut = min((i for i in (value.find("_"), value.find("-")) if i >= 0), default=-1)
    return _vendor_ok(value[cut + 1 :])


def _mixed(value: str) -> bool:
    body = re.sub(r"^[a-z]+(?:-[a-z]+)*-", "", value)
    return _vendor_ok(body) and any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _b64decode(value: str) -> bytes | None:
    """Decode standard base64 (padding optional); None when ``value`` is not base64."""
    body = value.rstrip("=")
    if len(body) % 4 == 1 or any(c not in _B64 for c in body):
        return None
    bits = 0
    nbits = 0
    out = bytearray()
    for c in body:
        bits = (bits << 6) | _B64[c]
        nbits += 6
        if nbits >= 8:
            nbits -= 8
            out.append((bits >> nbits) & 0xFF)
    return bytes(out)


def _basic_ok(value: str) -> bool:
    """``Basic`` credentials are base64 of ``user:password``."""
    raw = _b64decode(value)
    try:
        decoded = raw.decode("utf-8") if raw is not None else ""
    except UnicodeDecodeError:
        return False
    user, sep, pw = decoded.partition(":")
    return bool(sep and pw and decoded.isprintable() and not _is_placeholder(pw))


def _token_ok(value: str) -> bool:
    return not _is_placeholder(value) and _looks_random(value)


def _auth_ok(value: str) -> bool:
    return not _is_placeholder(value) and (_looks_random(value) or (len(value) >= 20 and _classes(value) >= 2))


_RULES: tuple[_Rule, ...] = (
    _r("anthropic-api-key", "sk", r"sk-ant-[a-z]*\d*-?[A-Za-z0-9_-]{32,}" + _E, check=_mixed, edge=True),
    _r("openai-api-key", "sk", r"sk-(?!ant-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_-]{20,}" + _E, check=_mixed, edge=True),
    _r("github-token", "u", _B + r"gh[pousr]_[A-Za-z0-9]{36,251}" + _E, check=_after_prefix),
    _r("github-fine-grained-pat", "u", _B + r"github_pat_[A-Za-z0-9_]{60,255}" + _E, check=_after_prefix),
    _r("gitlab-token", "gl", _B + r"gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas)-[A-Za-z0-9_-]{20,64}" + _E, check=_after_prefix),
    _r("aws-access-key-id", "A", r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])", check=lambda v: _vendor_ok(v[4:])),
    _r("google-api-key", "A", r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}" + _E, check=lambda v: _vendor_ok(v[4:])),
    _r("twilio-account-sid", "A", r"(?<![A-Za-z0-9])AC[0-9a-f]{32}(?![A-Za-z0-9])", check=lambda v: _vendor_ok(v[2:])),
    _r("twilio-api-key", "S", r"(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", check=lambda v: _vendor_ok(v[2:])),
    _r("sendgrid-api-key", "S", _B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _E, check=lambda v: _vendor_ok(v[3:])),
    _r("slack-token", "xox", _B + r"(?:xox[abposre]-[0-9A-Za-z-]{10,250}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]{20,})" + _E, check=_mixed),
    _r("slack-webhook", "dot", r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{20,})", 1),
    _r("stripe-secret-key", "u", r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{20,247}" + _E, check=_after_prefix),
    _r("stripe-webhook-secret", "u", r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{24,64}" + _E, check=_after_prefix),
    _r("npm-token", "u", r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36}" + _E, check=_after_prefix),
    _r("pypi-token", "pypi", _B + r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}" + _E),
    _r("huggingface-token", "u", r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,40}" + _E, check=_mixed),
    _r("discord-bot-token", "dot", _B + r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + _E, check=_mixed),
    _r("discord-webhook", "dot", r"discord(?:app)?\.com/api/webhooks/(\d{17,20}/[A-Za-z0-9_-]{60,68})" + _E, 1),
    _r("shopify-token", "u", r"(?<![A-Za-z0-9])shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _E, check=_after_prefix),
    _r("digitalocean-token", "u", r"(?<![A-Za-z0-9])do[opr]_v1_[a-f0-9]{64}" + _E, check=lambda v: _vendor_ok(v[7:])),
    _r("mailgun-api-key", "mailgun", _B + r"key-[0-9a-f]{32}" + _E, check=lambda v: _mixed(v[4:])),
    _r("azure-storage-key", "A", r"AccountKey=([A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])", 1, check=_vendor_ok),
    _r("azure-shared-access-key", "S", r"SharedAccessKey=([A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])", 1, check=_vendor_ok),
    _r("age-secret-key", "A", r"AGE-SECRET-KEY-1[0-9A-Z]{58}(?![0-9A-Za-z])"),
    _r("jwt", "eyJ", _B + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _E),
    _r("bearer-token", "bearer", r"(?i:\bbearer)[ \t]+([A-Za-z0-9_~+/.=-]{16,})(?![A-Za-z0-9_~+/.=-])", 1, check=_token_ok),
    _r("basic-auth", "basic", r"(?i:\bbasic)[ \t]+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", 1, check=_basic_ok),
    _r(
        "authorization-header",
        "authorization",
        r"(?i)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?!(?:bearer|basic)\b)(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?([A-Za-z0-9._~+/=-]{16,})(?![A-Za-z0-9._~+/=-])",
        1,
        check=_auth_ok,
    ),
    _r(
        "putty-private-key",
        "putty",
        r"Private-Lines:[ \t]*\d+[ \t]*(?:\r?\n|\\n)[ \t]*"
        r"((?:[A-Za-z0-9+/=]+(?:\r?\n|\\n)[ \t]*)*[A-Za-z0-9+/=]+)(?=[ \t]*(?:\r?\n|\\[rn]|[\"']|$))",
        1,
    ),
)

# --------------------------------------------------------------------------- custom detectors

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PEM_RUN = re.compile(r"(?:[A-Za-z0-9+/=]|[ \t\r\n]|\\[rn])*")
_PEM_LEAD = re.compile(r"(?:\s|\\[rn])*")
_PEM_B64_RUN = re.compile(r"[A-Za-z0-9+/=]{12}")
_PEM_NOT_BODY = re.compile(r"[\"'(){};`]")


def _pem(text: str, low: str) -> Iterator[_Hit]:
    """PEM/OpenSSH/PGP private key blocks, raw or escaped inside a JSON string."""
    for m in _PEM_BEGIN.finditer(text):
        kind = m.group(1)
        name = "openssh-private-key" if "OPENSSH" in kind else "pgp-private-key" if "PGP" in kind else "private-key"
        start = m.end()
        end_m = _PEM_END.search(text, start)
        next_begin = _PEM_BEGIN.search(text, start)
        if end_m and (next_begin is None or next_begin.start() > end_m.start()):
            stop = end_m.start()
        else:  # truncated paste: take the run of base64 lines after the header
            stop = _PEM_RUN.match(text, start).end()  # type: ignore[union-attr]
        start = _PEM_LEAD.match(text, start, stop).end()  # type: ignore[union-attr]
        while stop > start:
            if text[stop - 1] in " \t\r\n":
                stop -= 1
            elif text[stop - 2 : stop] in ("\\n", "\\r"):
                stop -= 2
            else:
                break
        body = text[start:stop]
        # key material is base64 lines (plus Proc-Type/DEK-Info headers), never code or quotes
        if stop > start and _PEM_B64_RUN.search(body) and not _PEM_NOT_BODY.search(body):
            yield start, stop, name


_TELEGRAM = re.compile(r":[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])")


def _telegram(text: str, low: str) -> Iterator[_Hit]:
    """Telegram bot tokens ``<8-10 digit bot id>:<35 chars>``, found from the colon (fast)."""
    for m in _TELEGRAM.finditer(text):
        j = m.start()
        while j and text[j - 1].isdigit():
            j -= 1
        if 8 <= m.start() - j <= 10 and not (j and (text[j - 1].isalnum() and text[j - 3 : j] != "bot")):
            if _mixed(m.group()[1:]):
                yield j, m.end(), "telegram-bot-token"


_DB_SCHEMES = frozenset(
    "postgres postgresql mysql mariadb mongodb mongodb+srv redis rediss amqp amqps mssql sqlserver "
    "oracle cockroachdb clickhouse couchdb neo4j neo4j+s bolt cassandra memcached ldap ldaps "
    "db2 sybase snowflake influxdb elasticsearch rabbitmq nats kafka".split()
)
_PCT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_URL_CRED = re.compile(
    r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{1,30})://([^\s:/?#@\"'<>\[\]`]*):([^\s/?#\"'<>`]+)@(?=[A-Za-z0-9\[])"
)


def _url(text: str, low: str) -> Iterator[_Hit]:
    """``scheme://user:password@host`` — the password only."""
    for m in _URL_CRED.finditer(text):
        value = m.group(3)
        plain = _PCT_RE.sub(lambda e: chr(int(e.group(1), 16)), value)  # a%20secret -> a secret
        if len(plain) < 5 or _is_placeholder(plain) or any(c.isspace() for c in plain):
            continue
        scheme = m.group(1).lower()
        name = "db-url-password" if scheme in _DB_SCHEMES or scheme.startswith("jdbc") else "url-password"
        yield m.start(3), m.end(3), name


_CONNSTR_KEY = re.compile(r"(?:password|pwd)[ \t]*=(?!=)")  # on the lower-cased text
_CONNSTR_VALUE = re.compile(r"[ \t]*(?:\{([^}\r\n]{1,200})\}|([^;\"'`\r\n]{1,200}?))[ \t]*(?=;|[\"'`\r\n]|$)")
_CONNSTR_PAIR = re.compile(r"[A-Za-z][A-Za-z ]*=[^;=\r\n]*;")


def _connstr(text: str, low: str) -> Iterator[_Hit]:
    """``Server=...;User Id=...;Password=value;`` — needs other ``key=value;`` pairs on the line."""
    if ";" not in text:
        return
    for m in _CONNSTR_KEY.finditer(low):
        j = m.start() - 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        if j >= 0 and text[j] not in ";\"'`\n":
            continue
        v = _CONNSTR_VALUE.match(text, m.end())
        if v is None:
            continue
        g = 1 if v.group(1) is not None else 2
        value = v.group(g)
        if _is_placeholder(value) or " " in value.strip():
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if len(_CONNSTR_PAIR.findall(line)) < 2:
            continue
        yield v.start(g), v.end(g), "connection-string-password"


# ---- assignments: NAME <op> VALUE, for password-like and secret-like names

# One literal-led regex per keyword (run on the lower-cased text, only when the keyword occurs).
_ASSIGN_HIT: dict[str, re.Pattern[str]] = {
    kw: re.compile(kw + r"[a-z0-9_.-]*([\"']?\]?)[ \t]*(:=|=>|=(?![=~])|:(?![:/\\]))") for kw in _ASSIGN_KEYWORDS
}
_IDCHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_WORDS_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PW_WORDS = frozenset({"password", "passwd", "passphrase", "passcode", "pwd", "pass", "pw", "pword", "passw"})
_PW_SUFFIX = frozenset({"value", "str", "string", "plain", "plaintext", "clear", "cleartext"})
_SECRET_LAST = frozenset(
    {"secret", "secrets", "apikey", "credential", "credentials", "secretkey", "privatekey",
     "accesskey", "clientsecret", "authtoken", "accesstoken", "refreshtoken", "apitoken", "apisecret"}
)
_KEY_QUAL = frozenset(
    {"api", "access", "secret", "private", "client", "auth", "signing", "sign", "encryption", "encrypt",
     "master", "app", "application", "account", "subscription", "consumer", "webhook", "storage",
     "shared", "service", "primary", "secondary", "session", "hmac", "jwt", "admin", "deploy"}
)
_TOKEN_QUAL = frozenset(
    {"access", "auth", "refresh", "bearer", "api", "bot", "session", "oauth", "github", "gh", "gitlab",
     "slack", "personal", "service", "app", "client", "sas", "jwt", "npm", "pypi", "hf", "registry",
     "deploy", "admin", "discord", "telegram", "id", "secret"}
)
_NAME_STOP = frozenset({"public", "pub", "publickey"})  # publicKeyToken, public_key: not secrets
_LINE_PREFIX = re.compile(r"[ \t>*+-]*(?:(?:export|set|setx|declare -x|local|ENV)[ \t]+|\$env:)?")
_UNQUOTED = re.compile(r"[^\s\"'`<>]+")
_QUERY_VALUE = re.compile(r"[^\s&#\"'`<>)]+")
_EOL_REST = re.compile(r"[ \t]*(?:[#;].*)?$", re.M)


def _classify(key: str) -> str | None:
    """Kind of name: 'password', 'aws', 'strong' or 'weak' secret, or None when not secret-like."""
    words = [w.lower() for w in _WORDS_RE.findall(key)]
    while words and words[-1].isdigit():
        words.pop()
    if not words or any(w in _NAME_STOP for w in words):
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last in _PW_SUFFIX and prev:
        last, prev = prev, words[-3] if len(words) > 2 else ""
    if last in _PW_WORDS or last.endswith(("password", "passwd")):
        return "password"
    if "secret" in words and ("aws" in words or "access" in words):
        return "aws"
    if last in _SECRET_LAST or last.endswith(("secret", "apikey", "secretkey", "privatekey", "accesstoken", "authtoken")):
        return "strong"
    if last == "key" and prev in _KEY_QUAL:
        return "strong"
    if last in ("token", "tokens"):
        return "strong" if prev in _TOKEN_QUAL else "weak"
    return None


def _value_at(text: str, pos: int, key_start: int, key: str) -> tuple[int, int, bool] | None:
    """Locate the value after an assignment operator: (start, end, quoted) or None."""
    n = len(text)
    while pos < n and text[pos] in " \t":
        pos += 1
    if pos < n - 1 and text[pos] in "Lbrufs@" and text[pos + 1] in "\"'":
        pos += 1  # L"..." r'...' @"..."
    if pos < n and text[pos] in "\"'`":
        q = text[pos]
        close = text.find(q, pos + 1)
        nl = text.find("\n", pos + 1)
        if close < 0 or (0 <= nl < close):
            return None
        return pos + 1, close, True
    line_start = text.rfind("\n", 0, key_start) + 1
    before = text[line_start:key_start]
    if before.endswith(("?", "&")):
        m = _QUERY_VALUE.match(text, pos)
        return (pos, m.end(), False) if m else None
    m = _UNQUOTED.match(text, pos)
    if not m:
        return None
    end = m.end()
    after = text[end : end + 1]
    if before.endswith("`"):
        return (pos, end, False) if after == "`" else None
    if key.startswith("-"):
        return (pos, end, False) if after in ("", " ", "\t", "\r", "\n") else None
    if _LINE_PREFIX.fullmatch(before) and _EOL_REST.match(text, end):
        return pos, end, False
    return None


_SECRET_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~:!@*#$%^&]+")
_IDENTIFIER = re.compile(r"[A-Za-z_]+")  # a bare variable name (no digits): code, not a value


def _value_ok(kind: str, value: str, quoted: bool, key: str = "") -> bool:
    """Whether ``value`` assigned to a name of ``kind`` is worth redacting."""
    if _is_placeholder(value) or any(c.isspace() for c in value) or "-----BEGIN" in value:
        return False
    if not quoted:
        # code, not configuration: calls, subscripts, member access, variables
        if value.endswith((";", ",")) or any(c in value for c in "()[]{}") or _IDENTIFIER.fullmatch(value):
            return False
        if _CODE_VALUE_RE.fullmatch(value) and (  # config.password; X = module.X (an alias)
            not any(c.isdigit() for c in value) or re.split(r"\.|->|::", value)[-1] == key
        ):
            return False
    if kind == "password":
        if len(value) < 4:
            return False
        return quoted or len(value) >= 16 or not _PLAIN_WORD_RE.fullmatch(value)
    if not _SECRET_CHARS.fullmatch(value):  # generated secrets never hold brackets, quotes, \\
        return False
    if kind == "weak":
        return _looks_random(value)
    # strong / aws: a secret-only name, so a shorter or less random value still counts
    return len(value) >= 8 and (any(c.isdigit() for c in value) or (len(value) >= 12 and _classes(value) >= 3))


def _assign(text: str, low: str, keywords: list[str]) -> Iterator[_Hit]:
    """Values assigned to password-like or secret-like names in code, JSON, YAML, INI, .env, flags."""
    seen: set[int] = set()
    for m in (m for kw in keywords for m in _ASSIGN_HIT[kw].finditer(low)):
        if m.end() in seen:  # secret_token = ... is found by two keywords
            continue
        seen.add(m.end())
        key_start = m.start()
        while key_start and low[key_start - 1] in _IDCHARS:
            key_start -= 1
        key = text[key_start : m.start(1)]
        kind = _classify(key)
        if kind is None:
            continue
        found = _value_at(text, m.end(), key_start, key)
        if found is None:
            continue
        start, end, quoted = found
        value = text[start:end]
        if not _value_ok(kind, value, quoted, key):
            continue
        yield start, end, _name_for(kind, value)


_XML_ELEMENT = re.compile(r"<([A-Za-z_][\w:.-]{0,80})>([^<>\s]{1,300})</\1>")
_XML_VALUE_ATTR = re.compile(r"value[ \t]*=[ \t]*([\"'])([^\"'<>\r\n]{1,300})\1")
_XML_KEY_ATTR = re.compile(r"(?:key|name)[ \t]*=[ \t]*[\"']([^\"'<>]{1,120})[\"'][ \t\r\n]+$")


def _name_for(kind: str, value: str) -> str:
    if kind == "password":
        return "password-assignment"
    if kind == "aws" and re.fullmatch(r"[A-Za-z0-9/+]{40}", value):
        return "aws-secret-access-key"
    return "secret-assignment"


def _xml(text: str, low: str, keywords: list[str]) -> Iterator[_Hit]:
    """``<password>v</password>`` and .NET ``<add key="DbPassword" value="v" />``."""
    for m in _XML_ELEMENT.finditer(text):
        tag = m.group(1).rpartition(":")[2]
        if not any(kw in tag.lower() for kw in keywords):  # most tags are <strong>, <code>, ...
            continue
        kind = _classify(tag)
        if kind and _value_ok(kind, m.group(2), True):
            yield m.start(2), m.end(2), _name_for(kind, m.group(2))
    if "value" not in low:
        return
    for m in _XML_VALUE_ATTR.finditer(text):
        tag_start = text.rfind("<", max(0, m.start() - 300), m.start())
        if tag_start < 0:
            continue
        k = _XML_KEY_ATTR.search(text, tag_start, m.start())
        kind = _classify(k.group(1)) if k else None
        if kind and _value_ok(kind, m.group(2), True):
            yield m.start(2), m.end(2), _name_for(kind, m.group(2))


_CUSTOM: tuple[tuple[str, Callable[[str, str], Iterator[_Hit]]], ...] = (
    ("BEGIN", _pem),
    ("url", _url),
    ("colon", _telegram),
)


# --------------------------------------------------------------------------- engine


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _lower(text: str) -> str:
    """Lower-case copy with the same offsets as ``text`` (non-Latin-1 characters become '?')."""
    if text.isascii():
        return text.lower()
    return text.encode("latin-1", "replace").lower().decode("latin-1")


def _candidates(text: str) -> list[_Hit]:
    fired = {_anchor_gate(found) for found in _ANCHOR_RE.findall(text)}
    low = _lower(text)
    for key, literals in _LOW_GATES.items():
        if any(lit in low for lit in literals):
            fired.add(key)
    hits: list[_Hit] = []
    for rule in _RULES:
        if rule.gate not in fired:
            continue
        for m in rule.regex.finditer(text):
            s = m.start(rule.group)
            if rule.edge and s and text[s - 1] in _TOKEN_CHARS:
                continue
            if rule.check is None or rule.check(m.group(rule.group)):
                hits.append((s, m.end(rule.group), rule.name))
    for key, detect in _CUSTOM:
        if key in fired:
            hits.extend(detect(text, low))
    keywords = [kw for kw in _ASSIGN_KEYWORDS if kw in low]
    if keywords:
        hits.extend(_assign(text, low, keywords))
        if "pass" in keywords or "pw" in keywords:
            hits.extend(_connstr(text, low))
        if "<" in text:
            hits.extend(_xml(text, low, keywords))
    return hits


def _merge(text: str, hits: list[_Hit]) -> list[Finding]:
    """Drop hits touching existing markers; merge overlaps, naming each by its most specific hit."""
    if "[REDACTED:" in text:
        marks = [m.span() for m in _MARKER_RE.finditer(text)]
        hits = [h for h in hits if not any(h[0] < e and s < h[1] for s, e in marks)]
    hits.sort()
    out: list[Finding] = []
    cur_s = cur_e = -1
    cur_name = ""
    for s, e, name in hits:
        if s < cur_e:
            cur_e = max(cur_e, e)
            if _PRIORITY[name] > _PRIORITY[cur_name]:
                cur_name = name
            continue
        if cur_e > 0:
            out.append(Finding(cur_name, 0, cur_s, cur_e))
        cur_s, cur_e, cur_name = s, e, name
    if cur_e > 0:
        out.append(Finding(cur_name, 0, cur_s, cur_e))
    # line numbers, counted incrementally
    lined: list[Finding] = []
    line, pos = 1, 0
    for f in out:
        line += text.count("\n", pos, f.start)
        pos = f.start
        lined.append(Finding(f.pattern, line, f.start, f.end))
    return lined


def find_secrets(text: str) -> list[Finding]:
    """Every secret value in ``text``, in order, without changing anything."""
    hits = _candidates(text)
    return _merge(text, hits) if hits else []


def scrub(text: str) -> Scrubbed:
    """``text`` with each secret value replaced by ``[REDACTED:<pattern>]``, plus the findings."""
    findings = find_secrets(text)
    if not findings:
        return Scrubbed(text, ())
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos : f.start])
        parts.append(marker(f.pattern))
        pos = f.end
    parts.append(text[pos:])
    return Scrubbed("".join(parts), tuple(findings))

"""FAKE but format-valid credentials of every kind vaultseek.scrub covers, planted into contexts.

Everything is drawn from a seeded ``random.Random``: correct prefixes, lengths and charsets,
JWTs with base64url JSON header/payload, PEM blocks with random base64 body lines. Nothing
here is a real credential. ``plant`` puts one credential into a realistic snippet (prose,
fenced code, JSON, YAML, .env, INI, URL, shell ``export``, HTTP headers).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from typing import Callable

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
UPPER_NUM = string.ascii_uppercase + string.digits

CONTEXTS: tuple[str, ...] = ("prose", "code", "json", "yaml", "env", "ini", "url", "shell", "http")


@dataclass(frozen=True)
class Credential:
    """One fake credential.

    ``display`` is what a person would paste (a token, a URL, a header value, a PEM block);
    ``secrets`` are the fragments that must not survive scrubbing (for PEM: every body line);
    ``shape`` says how it is planted: token, header, url, named (needs a key name) or block.
    """

    kind: str
    pattern: str
    display: str
    secrets: tuple[str, ...]
    shape: str
    name: str  # snake_case key name used when the context needs one


@dataclass(frozen=True)
class Planted:
    """A snippet of text with one credential planted in it."""

    kind: str
    context: str
    pattern: str
    text: str
    secrets: tuple[str, ...]


def _s(rng: random.Random, chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


def _mixed(rng: random.Random, chars: str, n: int) -> str:
    """Random string that contains at least one letter and one digit (as real tokens do)."""
    while True:
        v = _s(rng, chars, n)
        if any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
            return v


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _password(rng: random.Random, n: int | None = None) -> str:
    """A password that is safe in every context: starts with a letter, no quotes/spaces/;/#/@."""
    n = n or rng.randint(10, 20)
    while True:
        v = rng.choice(string.ascii_letters) + _s(rng, ALNUM + "!*+-_.^~", n - 1)
        if any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v):
            if v[-1] not in ".-_":
                return v


def _tok(kind: str, pattern: str, value: str, name: str) -> Credential:
    return Credential(kind, pattern, value, (value,), "token", name)


def _openai(rng: random.Random) -> Credential:
    style = rng.choice(["legacy", "proj", "svcacct"])
    if style == "legacy":
        v = "sk-" + _mixed(rng, ALNUM, 20) + "T3BlbkFJ" + _mixed(rng, ALNUM, 20)
    else:
        v = f"sk-{style}-" + _mixed(rng, B64URL, 74) + "T3BlbkFJ" + _mixed(rng, B64URL, 74)
    return _tok("openai", "openai-api-key", v, "openai_api_key")


def _anthropic(rng: random.Random) -> Credential:
    v = "sk-ant-api03-" + _mixed(rng, B64URL, 93) + "AA"
    return _tok("anthropic", "anthropic-api-key", v, "anthropic_api_key")


def _github(rng: random.Random) -> Credential:
    v = rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _mixed(rng, ALNUM, 36)
    return _tok("github", "github-token", v, "github_token")


def _github_pat(rng: random.Random) -> Credential:
    v = "github_pat_" + _mixed(rng, ALNUM, 22) + "_" + _mixed(rng, ALNUM, 59)
    return _tok("github-fine-grained", "github-fine-grained-pat", v, "gh_pat")


def _gitlab(rng: random.Random) -> Credential:
    return _tok("gitlab", "gitlab-token", "glpat-" + _mixed(rng, B64URL, 20), "gitlab_token")


def _aws_key_id(rng: random.Random) -> Credential:
    v = rng.choice(["AKIA", "ASIA"]) + _s(rng, string.ascii_uppercase + "234567", 16)
    return _tok("aws-access-key-id", "aws-access-key-id", v, "aws_access_key_id")


def _aws_secret(rng: random.Random) -> Credential:
    v = _mixed(rng, B64, 40)
    return Credential("aws-secret", "aws-secret-access-key", v, (v,), "named", "aws_secret_access_key")


def _google(rng: random.Random) -> Credential:
    return _tok("google", "google-api-key", "AIza" + _mixed(rng, B64URL, 35), "google_maps_key")


def _slack(rng: random.Random) -> Credential:
    p = rng.choice("bpars")
    v = f"xox{p}-{_s(rng, string.digits, 11)}-{_s(rng, string.digits, 13)}-{_mixed(rng, ALNUM, 24)}"
    return _tok("slack", "slack-token", v, "slack_bot_token")


def _slack_webhook(rng: random.Random) -> Credential:
    path = f"T{_s(rng, UPPER_NUM, 8)}/B{_s(rng, UPPER_NUM, 10)}/{_mixed(rng, ALNUM, 24)}"
    url = "https://hooks.slack.com/services/" + path
    return Credential("slack-webhook", "slack-webhook", url, (path,), "url", "slack_webhook_url")


def _stripe(rng: random.Random) -> Credential:
    v = rng.choice(["sk_live_", "rk_live_", "sk_test_", "rk_test_"]) + _mixed(rng, ALNUM, rng.choice([24, 99]))
    return _tok("stripe", "stripe-secret-key", v, "stripe_key")


def _stripe_webhook(rng: random.Random) -> Credential:
    return _tok("stripe-webhook", "stripe-webhook-secret", "whsec_" + _mixed(rng, ALNUM, 32), "stripe_signing")


def _twilio_key(rng: random.Random) -> Credential:
    return _tok("twilio-key", "twilio-api-key", "SK" + _mixed(rng, HEX, 32), "twilio_key")


def _twilio_sid(rng: random.Random) -> Credential:
    return _tok("twilio-sid", "twilio-account-sid", "AC" + _mixed(rng, HEX, 32), "twilio_account")


def _sendgrid(rng: random.Random) -> Credential:
    v = "SG." + _mixed(rng, B64URL, 22) + "." + _mixed(rng, B64URL, 43)
    return _tok("sendgrid", "sendgrid-api-key", v, "sendgrid_key")


def _npm(rng: random.Random) -> Credential:
    return _tok("npm", "npm-token", "npm_" + _mixed(rng, ALNUM, 36), "npm_token")


def _pypi(rng: random.Random) -> Credential:
    return _tok("pypi", "pypi-token", "pypi-AgEIcHlwaS5vcmc" + _mixed(rng, B64URL, rng.randint(60, 160)), "pypi_token")


def _hf(rng: random.Random) -> Credential:
    return _tok("huggingface", "huggingface-token", "hf_" + _mixed(rng, ALNUM, 34), "hf_token")


def _discord_bot(rng: random.Random) -> Credential:
    user_id = str(rng.randint(10**17, 10**18 - 1)).encode()
    v = _b64url(user_id) + "." + _mixed(rng, B64URL, 6) + "." + _mixed(rng, B64URL, 38)
    return _tok("discord-bot", "discord-bot-token", v, "discord_bot_token")


def _discord_webhook(rng: random.Random) -> Credential:
    path = f"{rng.randint(10**17, 10**18 - 1)}/{_mixed(rng, B64URL, 68)}"
    url = rng.choice(["https://discord.com", "https://discordapp.com"]) + "/api/webhooks/" + path
    return Credential("discord-webhook", "discord-webhook", url, (path,), "url", "discord_webhook")


def _telegram(rng: random.Random) -> Credential:
    v = f"{rng.randint(10**7, 10**10 - 1)}:AA{_mixed(rng, B64URL, 33)}"
    return _tok("telegram", "telegram-bot-token", v, "telegram_bot_token")


def _shopify(rng: random.Random) -> Credential:
    v = rng.choice(["shpat_", "shpss_", "shpca_", "shppa_"]) + _mixed(rng, HEX, 32)
    return _tok("shopify", "shopify-token", v, "shopify_access")


def _digitalocean(rng: random.Random) -> Credential:
    v = rng.choice(["dop_v1_", "doo_v1_", "dor_v1_"]) + _mixed(rng, HEX, 64)
    return _tok("digitalocean", "digitalocean-token", v, "do_token")


def _mailgun(rng: random.Random) -> Credential:
    return _tok("mailgun", "mailgun-api-key", "key-" + _mixed(rng, HEX, 32), "mailgun_key")


def _azure_storage(rng: random.Random) -> Credential:
    key = _b64(rng.randbytes(64))
    acct = "st" + _s(rng, string.ascii_lowercase + string.digits, 10)
    conn = f"DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={key};EndpointSuffix=core.windows.net"
    return Credential("azure-storage", "azure-storage-key", conn, (key,), "header", "azure_storage_connection")


def _azure_sas(rng: random.Random) -> Credential:
    key = _b64(rng.randbytes(32))
    conn = (
        f"Endpoint=sb://ns-{_s(rng, string.ascii_lowercase, 6)}.servicebus.windows.net/;"
        f"SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}"
    )
    return Credential("azure-servicebus", "azure-shared-access-key", conn, (key,), "header", "servicebus_connection")


def _age(rng: random.Random) -> Credential:
    v = "AGE-SECRET-KEY-1" + _s(rng, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    return _tok("age", "age-secret-key", v, "age_identity")


def _jwt(rng: random.Random) -> Credential:
    header = {"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"}
    payload = {
        "sub": str(rng.randint(1, 10**9)),
        "name": rng.choice(["Ada Lovelace", "Alan Turing", "Grace Hopper"]),
        "iat": rng.randint(1_500_000_000, 1_800_000_000),
        "scope": "read write",
    }
    parts = [_b64url(json.dumps(p, separators=(",", ":")).encode()) for p in (header, payload)]
    v = ".".join(parts) + "." + _b64url(rng.randbytes(32))
    return _tok("jwt", "jwt", v, "session_jwt")


def _pem_lines(rng: random.Random, nbytes: int, width: int) -> list[str]:
    body = _b64(rng.randbytes(nbytes))
    return [body[i : i + width] for i in range(0, len(body), width)]


def _pem(rng: random.Random) -> Credential:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY"])
    lines = _pem_lines(rng, rng.randint(120, 1200), 64)
    block = "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])
    return Credential("pem", "private-key", block, tuple(lines), "block", "private_key")


def _openssh(rng: random.Random) -> Credential:
    lines = _pem_lines(rng, rng.randint(300, 2500), 70)
    block = "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *lines, "-----END OPENSSH PRIVATE KEY-----"])
    return Credential("openssh", "openssh-private-key", block, tuple(lines), "block", "ssh_key")


def _pgp(rng: random.Random) -> Credential:
    lines = _pem_lines(rng, rng.randint(400, 1500), 64)
    checksum = "=" + _b64(rng.randbytes(3))
    block = "\n".join(
        ["-----BEGIN PGP PRIVATE KEY BLOCK-----", "", *lines, checksum, "-----END PGP PRIVATE KEY BLOCK-----"]
    )
    return Credential("pgp", "pgp-private-key", block, (*lines, checksum), "block", "signing_key")


def _putty(rng: random.Random) -> Credential:
    public = _pem_lines(rng, 51, 64)
    private = _pem_lines(rng, rng.randint(40, 400), 64)
    block = "\n".join(
        [
            "PuTTY-User-Key-File-3: ssh-ed25519",
            "Encryption: none",
            "Comment: eddsa-key-20240101",
            f"Public-Lines: {len(public)}",
            *public,
            f"Private-Lines: {len(private)}",
            *private,
            "Private-MAC: " + _s(rng, HEX, 64),
        ]
    )
    return Credential("putty", "putty-private-key", block, tuple(private), "block", "ppk")


def _bearer(rng: random.Random) -> Credential:
    tok = _mixed(rng, ALNUM, rng.randint(32, 48))
    return Credential("bearer", "bearer-token", f"Bearer {tok}", (tok,), "header", "auth_header")


def _basic(rng: random.Random) -> Credential:
    user = rng.choice(["alice", "deploy", "ci-bot", "svc_reports"])
    cred = _b64(f"{user}:{_password(rng)}".encode())
    return Credential("basic", "basic-auth", f"Basic {cred}", (cred,), "header", "auth_header")


def _auth_header(rng: random.Random) -> Credential:
    scheme = rng.choice(["Token ", "token ", "ApiKey ", "SSWS ", ""])
    tok = _mixed(rng, ALNUM, rng.randint(32, 44))
    return Credential("authorization", "authorization-header", scheme + tok, (tok,), "header", "authorization")


def _db_url(rng: random.Random) -> Credential:
    scheme = rng.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "mssql"])
    pw = _password(rng).replace("^", "x").replace("+", "x")
    host = rng.choice(["db.internal", "10.0.3.7", "cluster0.abcde.mongodb.net", "cache.prod.local"])
    url = f"{scheme}://{rng.choice(['app', 'admin', 'reporting'])}:{pw}@{host}:5432/app"
    return Credential("db-url", "db-url-password", url, (pw,), "url", "database_url")


def _url_pw(rng: random.Random) -> Credential:
    scheme = rng.choice(["https", "http", "ftp", "sftp", "smb"])
    pw = _password(rng).replace("^", "x").replace("+", "x")
    url = f"{scheme}://builder:{pw}@files.example.com/releases/latest"
    return Credential("url-userinfo", "url-password", url, (pw,), "url", "mirror_url")


def _connstr(rng: random.Random) -> Credential:
    pw = _password(rng)
    if rng.random() < 0.5:
        conn = (
            f"Server=tcp:sql-{_s(rng, string.ascii_lowercase, 5)}.database.windows.net,1433;"
            f"Initial Catalog=orders;User ID=sqladmin;Password={pw};Encrypt=True;"
        )
    else:
        conn = f"Driver={{ODBC Driver 18 for SQL Server}};Server=db01;Database=hr;Uid=report;Pwd={pw};"
    return Credential("connection-string", "connection-string-password", conn, (pw,), "header", "sql_connection")


def _password_cred(rng: random.Random) -> Credential:
    pw = _password(rng)
    return Credential("password", "password-assignment", pw, (pw,), "named", rng.choice(["password", "db_password", "passwd"]))


def _secret_cred(rng: random.Random) -> Credential:
    v = _mixed(rng, ALNUM, rng.choice([24, 32, 40]))
    name = rng.choice(["client_secret", "secret_key", "api_token", "webhook_secret", "access_token", "api_key"])
    return Credential("secret", "secret-assignment", v, (v,), "named", name)


MAKERS: dict[str, Callable[[random.Random], Credential]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "github": _github,
    "github-fine-grained": _github_pat,
    "gitlab": _gitlab,
    "aws-access-key-id": _aws_key_id,
    "aws-secret": _aws_secret,
    "google": _google,
    "slack": _slack,
    "slack-webhook": _slack_webhook,
    "stripe": _stripe,
    "stripe-webhook": _stripe_webhook,
    "twilio-key": _twilio_key,
    "twilio-sid": _twilio_sid,
    "sendgrid": _sendgrid,
    "npm": _npm,
    "pypi": _pypi,
    "huggingface": _hf,
    "discord-bot": _discord_bot,
    "discord-webhook": _discord_webhook,
    "telegram": _telegram,
    "shopify": _shopify,
    "digitalocean": _digitalocean,
    "mailgun": _mailgun,
    "azure-storage": _azure_storage,
    "azure-servicebus": _azure_sas,
    "age": _age,
    "jwt": _jwt,
    "pem": _pem,
    "openssh": _openssh,
    "pgp": _pgp,
    "putty": _putty,
    "bearer": _bearer,
    "basic": _basic,
    "authorization": _auth_header,
    "db-url": _db_url,
    "url-userinfo": _url_pw,
    "connection-string": _connstr,
    "password": _password_cred,
    "secret": _secret_cred,
}
KINDS: tuple[str, ...] = tuple(MAKERS)


def make_credential(kind: str, rng: random.Random) -> Credential:
    """A fresh fake credential of ``kind``."""
    return MAKERS[kind](rng)


# ------------------------------------------------------------------ contexts


def _upper(name: str) -> str:
    return name.upper()


def _header_name(name: str) -> str:
    return "X-" + "-".join(w.capitalize() for w in name.split("_"))


def _json_str(s: str) -> str:
    return json.dumps(s)  # escapes newlines as \n and quotes


def _indent(block: str, pad: str) -> str:
    return "\n".join(pad + line if line else line for line in block.split("\n"))


PROSE_BEFORE = "## Deploy notes\n\nMigrated the billing service on Tuesday. The old host is gone.\n\n"
PROSE_AFTER = "\n\nNext: rotate this after the demo and update the runbook.\n"


def _render(cred: Credential, context: str) -> str | None:
    """The snippet for ``cred`` in ``context``, or None when that pairing makes no sense."""
    d, name, shape = cred.display, cred.name, cred.shape
    env, up = _upper(name), _upper(name)
    if context == "prose":
        if shape == "block":
            return PROSE_BEFORE + "Here is the key I used, for the record:\n\n" + d + PROSE_AFTER
        if shape == "named":
            return PROSE_BEFORE + f"Set `{env}={d}` in the shell before starting the worker." + PROSE_AFTER
        if shape == "header" and cred.kind in ("bearer", "basic", "authorization"):
            return PROSE_BEFORE + f"The request needs `Authorization: {d}` or it fails with 401." + PROSE_AFTER
        if shape == "header":
            return PROSE_BEFORE + f"Connection string: {d}" + PROSE_AFTER
        return PROSE_BEFORE + f"I pasted the value here so I don't lose it: {d} and it expires in May." + PROSE_AFTER
    if context == "code":
        if shape == "block":
            return "Key file contents:\n\n```text\n" + d + "\n```\n"
        if shape == "header" and cred.kind in ("bearer", "basic", "authorization"):
            return f'```python\nheaders = {{"Authorization": "{d}"}}\nrequests.get(URL, headers=headers)\n```\n'
        return f'```python\nimport os\n\n{name} = "{d}"\nclient = connect({name})\n```\n'
    if context == "json":
        key = "Authorization" if cred.kind in ("bearer", "basic", "authorization") else name
        return '```json\n{\n  "service": "billing",\n  "' + key + '": ' + _json_str(d) + ',\n  "retries": 3\n}\n```\n'
    if context == "yaml":
        if shape == "block":
            return f"service:\n  name: billing\n  {name}: |\n{_indent(d, '    ')}\n  retries: 3\n"
        key = "authorization" if cred.kind in ("bearer", "basic", "authorization") else name
        return f"service:\n  name: billing\n  {key}: {d}\n  retries: 3\n"
    if context == "env":
        if shape == "block":
            return f'# .env\nLOG_LEVEL=info\n{up}="{d.replace(chr(10), chr(92) + "n")}"\nPORT=8080\n'
        value = f'"{d}"' if " " in d else d
        return f"# .env\nLOG_LEVEL=info\n{up}={value}\nPORT=8080\n"
    if context == "ini":
        if shape == "block":
            return f"[billing]\nhost = db.internal\n{name} =\n{_indent(d, '    ')}\ntimeout = 30\n"
        key = "authorization" if cred.kind in ("bearer", "basic", "authorization") else name
        return f"[billing]\nhost = db.internal\n{key} = {d}\ntimeout = 30\n"
    if context == "url":
        if shape in ("block", "header"):
            return None
        if shape == "url":
            return f"Webhook/endpoint: <{d}>\n" if cred.kind.endswith("webhook") else f"Clone from {d} then build.\n"
        query = name if shape == "named" else "key"
        return f"Open https://api.example.com/v1/export?format=csv&{query}={d}&page=2 to download.\n"
    if context == "shell":
        if shape == "block":
            return f"```bash\ncat > ~/.ssh/id_deploy <<'EOF'\n{d}\nEOF\nchmod 600 ~/.ssh/id_deploy\n```\n"
        return f'```bash\nexport {up}="{d}"\n./deploy.sh --env prod\n```\n'
    if context == "http":
        if shape == "block":
            return None
        if cred.kind in ("bearer", "basic", "authorization"):
            header = f"Authorization: {d}"
        elif shape == "named":
            header = f"{_header_name(name)}: {d}"
        elif cred.kind == "jwt":
            header = f"Authorization: Bearer {d}"
        else:
            header = f"{_header_name(name)}: {d}"
        return f"```http\nPOST /v1/charges HTTP/1.1\nHost: api.example.com\n{header}\nContent-Type: application/json\n```\n"
    raise ValueError(f"unknown context {context!r}")


def plant(cred: Credential, context: str) -> Planted | None:
    """``cred`` planted in a realistic ``context`` snippet, or None when the pairing makes no sense."""
    text = _render(cred, context)
    if text is None:
        return None
    return Planted(cred.kind, context, cred.pattern, text, cred.secrets)


def planted_set(seed: int = 1234, per_kind: int = 3) -> list[Planted]:
    """``per_kind`` fresh credentials of every kind, each planted in every context that fits."""
    rng = random.Random(seed)
    out: list[Planted] = []
    for kind in KINDS:
        for _ in range(per_kind):
            for context in CONTEXTS:
                p = plant(make_credential(kind, rng), context)
                if p is not None:
                    out.append(p)
    return out

"""vaultseek.scrub: every planted credential is redacted, nothing else is touched."""

from __future__ import annotations

import random
import re
import time

import pytest

from secret_factory import CONTEXTS, KINDS, make_credential, plant, planted_set
from vaultseek.scrub import (
    GENERIC_PATTERNS,
    PATTERN_NAMES,
    VENDOR_PATTERNS,
    Finding,
    Scrubbed,
    find_secrets,
    marker,
    scrub,
)

MARKER = re.compile(r"\[REDACTED:([a-z0-9-]+)\]")
SEEDS = (7, 1234, 99)


def first_line_of(text: str, fragments: tuple[str, ...]) -> int:
    """1-based line of the first occurrence of any fragment."""
    pos = min(i for i in (text.find(f) for f in fragments) if i >= 0)
    return text.count("\n", 0, pos) + 1


# ---------------------------------------------------------------- the catalogue


def test_pattern_catalogue() -> None:
    assert PATTERN_NAMES == VENDOR_PATTERNS + GENERIC_PATTERNS
    assert len(set(PATTERN_NAMES)) == len(PATTERN_NAMES)
    assert len(VENDOR_PATTERNS) >= 21
    assert len(GENERIC_PATTERNS) >= 11
    assert all(re.fullmatch(r"[a-z0-9-]+", n) for n in PATTERN_NAMES)
    assert marker("jwt") == "[REDACTED:jwt]"


def test_factory_covers_every_pattern() -> None:
    rng = random.Random(0)
    produced = {make_credential(kind, rng).pattern for kind in KINDS}
    assert produced == set(PATTERN_NAMES)


# ---------------------------------------------------------------- recall: every kind x every context


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_redacted_in_every_context(kind: str) -> None:
    rng = random.Random(f"{kind}-recall")
    checked = set()
    for _ in range(len(SEEDS)):
        for context in CONTEXTS:
            cred = make_credential(kind, rng)
            p = plant(cred, context)
            if p is None:
                continue
            checked.add(context)
            r = scrub(p.text)
            where = f"{kind} in {context}:\n{p.text}\n--- got ---\n{r.text}"
            for secret in p.secrets:
                assert secret not in r.text, where
            names = MARKER.findall(r.text)
            assert p.pattern in names, where
            # the finding that covers the (first) secret carries the expected name
            pos = p.text.find(p.secrets[0])
            covering = [f for f in r.findings if f.start <= pos < f.end]
            assert [f.pattern for f in covering] == [p.pattern], where
    assert {"prose", "code", "json", "yaml", "env", "ini", "shell"} <= checked


def test_planted_set_fully_redacted_and_idempotent() -> None:
    for seed in SEEDS:
        for p in planted_set(seed=seed, per_kind=2):
            once = scrub(p.text)
            assert all(s not in once.text for s in p.secrets), (p.kind, p.context)
            twice = scrub(once.text)
            assert twice.text == once.text, (p.kind, p.context)
            assert twice.findings == ()
            assert find_secrets(once.text) == []


def test_no_pem_body_line_survives() -> None:
    rng = random.Random(5)
    for kind in ("pem", "openssh", "pgp", "putty"):
        for context in CONTEXTS:
            cred = make_credential(kind, rng)
            p = plant(cred, context)
            if p is None:
                continue
            out = scrub(p.text).text
            for line in cred.secrets:
                assert line not in out, (kind, context)
                assert line[:40] not in out, (kind, context)


# ---------------------------------------------------------------- exact outputs


EXACT = [
    ('password = "hunter2xyz"', 'password = "[REDACTED:password-assignment]"'),
    ("db:\n  password: Tr0ub4dor&3\n  port: 5432\n", "db:\n  password: [REDACTED:password-assignment]\n  port: 5432\n"),
    ("DB_PASSWORD=s3cr3t!Pass # prod\n", "DB_PASSWORD=[REDACTED:password-assignment] # prod\n"),
    ('{"user": "app", "password": "Xk92!mzPq"}', '{"user": "app", "password": "[REDACTED:password-assignment]"}'),
    (
        "Connect with postgres://app:Sup3rS3cret@db.internal:5432/orders and then migrate.",
        "Connect with postgres://app:[REDACTED:db-url-password]@db.internal:5432/orders and then migrate.",
    ),
    (
        "Mirror: https://builder:N0tTh3P4ss@files.example.com/x.tar.gz (slow).",
        "Mirror: https://builder:[REDACTED:url-password]@files.example.com/x.tar.gz (slow).",
    ),
    (
        "I rotated it; the new key is ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5 and it works.",
        "I rotated it; the new key is [REDACTED:github-token] and it works.",
    ),
    (
        "export OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78\n./run.sh",
        "export OPENAI_API_KEY=[REDACTED:openai-api-key]\n./run.sh",
    ),
    (
        "curl -H 'Authorization: Bearer 9fQ2xL7mN4pR8sT1vW6yZ3bC5dF0gH2j' https://api.example.com",
        "curl -H 'Authorization: Bearer [REDACTED:bearer-token]' https://api.example.com",
    ),
    (
        "Server=tcp:sql1,1433;Database=hr;User ID=report;Password=Qw3rty!9z;Encrypt=True;",
        "Server=tcp:sql1,1433;Database=hr;User ID=report;Password=[REDACTED:connection-string-password];Encrypt=True;",
    ),
    (
        "Use `client_secret = Zr8Lk2Qw9Xv4Tn7Bm3Hp6` in the config.",
        "Use `client_secret = [REDACTED:secret-assignment]` in the config.",
    ),
    (
        "hooks: https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFGHI/aB3dE5fG7hI9jK1lM3nO5pQ7 done",
        "hooks: https://hooks.slack.com/services/[REDACTED:slack-webhook] done",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx3y\nZm9vYmFyYmF6cXV4\n-----END RSA PRIVATE KEY-----\nafter",
        "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED:private-key]\n-----END RSA PRIVATE KEY-----\nafter",
    ),
    (
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\nkqhkiG9w0BAQEF\\n-----END PRIVATE KEY-----\\n"}',
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\n[REDACTED:private-key]\\n-----END PRIVATE KEY-----\\n"}',
    ),
    (
        "Authorization: Basic YWxpY2U6V29uZGVybGFuZDQy\nHost: x",
        "Authorization: Basic [REDACTED:basic-auth]\nHost: x",
    ),
    ('<add key="DbPassword" value="Abc123!!" />', '<add key="DbPassword" value="[REDACTED:password-assignment]" />'),
    ("<password>Abc123!!xyz</password>", "<password>[REDACTED:password-assignment]</password>"),
    ("[smtp]\nuser = mailer\npassword = 8kT!pq2Zr\n", "[smtp]\nuser = mailer\npassword = [REDACTED:password-assignment]\n"),
    ("mysql --password=Hunter2xyz --user bob", "mysql --password=[REDACTED:password-assignment] --user bob"),
    ("DB_PASSWORD=Ab3.cd.ef9\n", "DB_PASSWORD=[REDACTED:password-assignment]\n"),
]


@pytest.mark.parametrize(("before", "after"), EXACT)
def test_exact_output(before: str, after: str) -> None:
    r = scrub(before)
    assert r.text == after
    assert scrub(r.text).text == after


def test_only_the_value_is_replaced_in_prose() -> None:
    text = (
        "# Incident 42\n\nWe leaked a token in the wiki. It was AKIAZ3MPLE7KEYID2QRS and it has been "
        "revoked.\n\nThe rest of this note is ordinary prose about the post-mortem.\n"
    )
    r = scrub(text)
    assert r.text == text.replace("AKIAZ3MPLE7KEYID2QRS", "[REDACTED:aws-access-key-id]")
    assert r.counts == {"aws-access-key-id": 1}


# ---------------------------------------------------------------- overlaps


def test_vendor_beats_generic_and_markers_never_nest() -> None:
    rng = random.Random(11)
    gh = make_credential("github", rng).display
    jwt = make_credential("jwt", rng).display
    text = f'api_key = "{gh}"\nAuthorization: Bearer {jwt}\ntoken: {gh}\n'
    r = scrub(text)
    assert r.text == f'api_key = "{marker("github-token")}"\nAuthorization: Bearer {marker("jwt")}\ntoken: {marker("github-token")}\n'
    assert "[REDACTED:[REDACTED" not in r.text
    assert len(MARKER.findall(r.text)) == len(r.findings) == 3


def test_anthropic_key_is_not_called_openai() -> None:
    key = make_credential("anthropic", random.Random(3)).display
    assert [f.pattern for f in find_secrets(f"ANTHROPIC_API_KEY={key}")] == ["anthropic-api-key"]


def test_existing_marker_is_left_alone_and_new_secret_found() -> None:
    pw = 'password = "[REDACTED:password-assignment]"\n'
    text = pw + "backup_password = 'Zx81!qwErty'\n"
    r = scrub(text)
    assert r.text == pw + "backup_password = '[REDACTED:password-assignment]'\n"
    assert [f.line for f in r.findings] == [2]


# ---------------------------------------------------------------- false positives

FALSE_POSITIVES = [
    "Call CreateFileW, then CloseHandle; see GetTokenInformation and AdjustTokenPrivileges.",
    "The CLSID is {6B29FC40-CA47-1067-B31D-00DD010662DA} and the IID is 6B29FC40-CA47-1067-B31D-00DD010662DA.",
    "SHA-256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "MD5 d41d8cd98f00b204e9800998ecf8427e and SHA-1 da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "The password parameter is a pointer to a null-terminated string that specifies the password.",
    "password=<your-password>",
    "api_key = YOUR_API_KEY",
    'api_key = "YOUR_API_KEY"',
    "password: xxxxxxxx",
    'password = "********"',
    "PASSWORD=$PASSWORD",
    "DB_PASS=${DB_PASS}",
    'cursor.execute("UPDATE users SET password = %s", (pw,))',
    'password = "%s"',
    "password = os.environ['DB_PASSWORD']",
    "token = get_token(session)",
    "Password = NULL;",
    "Password = pwszPassword;",
    "Password = (LPWSTR)pwPassword;",
    'Password = InputBox("Enter password")',
    "Password = False",
    "PASSWD_NOTREQD = &H20",
    "PasswordHistoryLength = 0;",
    'CHANGE_PASSWORD_GUID = "{AB721A53-1E2F-11D0-9819-00AA0040529B}"',
    '<assemblyIdentity name="Microsoft.Windows.Common-Controls" publicKeyToken="6595b64144ccf1df" />',
    "hToken = NULL;\nif (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &hToken))",
    "TokenOptions::SetHelperToken sets the helper token.",
    "Basic Debugging\n\nBasic Concepts of the API.",
    "The base64 sample dGhpcyBpcyBhIHRlc3Q= decodes to 'this is a test'.",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END PUBLIC KEY-----",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA9mKbJm8P0aL7 user@host",
    "Clone git@github.com:org/repo.git or https://user@example.com/repo.git",
    "Mail me at first.last@example.com; docs at https://example.com/a:b@c",
    "postgres://user:password@localhost:5432/db",
    "mysql://root:<password>@127.0.0.1/app",
    "ftp://anonymous:guest@ftp.example.com/pub",
    "| Password | String | The password for the account. |",
    "Password: Required. The user's password.",
    "**Password**: Enter the password you chose.",
    "We use scikit-learn and the disk-based task-queue; ask-me-anything sessions.",
    "The key-value store; a key-frame; monkey-patching.",
    "Set `SECRET_KEY` in settings.py before deploying.",
    "secret_key = settings.SECRET_KEY",
    "access_token = response.json()['access_token']",
    "auth_token: ${{ secrets.AUTH_TOKEN }}",
    "client_secret: {{ vault_client_secret }}",
    "The registry key HKEY_LOCAL_MACHINE\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion",
    "KEY_ALL_ACCESS = 0xF003F; KEY_READ = 0x20019",
    "ms.assetid: 3e0bdd31-4b7a-4f8a-a9c1-8d3b2bd1a2f1\nms.date: 05/31/2018",
    "Use the Bearer authentication scheme with a bearer token you obtained.",
    "Authorization: Bearer <token>",
    "Authorization: Bearer YOUR_ACCESS_TOKEN",
    "The eyJ prefix marks a base64url-encoded JSON object.",
    "Version 1.2.3:4 and time 12:34:56; ratio 16:9.",
    '<add key="Title" value="Abc123!!" />',
    "<Password>password</Password>",
    '<TokenType>Primary</TokenType>\n<KeyName>MyKey</KeyName>',
    "password: hunter",
    "key: value",
    # regressions found by scanning Python sources
    "MLKEM768X25519PrivateKey = rust_openssl.hpke.MLKEM768X25519PrivateKey",
    '_SK_START = b"-----BEGIN OPENSSH PRIVATE KEY-----"\n_SK_END = b"-----END OPENSSH PRIVATE KEY-----"',
    "left_secret = left_secrets[ix]\nadd_to_git_credential: Annotated[bool, typer.Option()]",
    'token = r"[-!#$%&\'*+.^_`|~0-9a-zA-Z]+"',
    'HEADER_X_ACCESS_TOKEN = "X-Xet-Access-Token"',
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_false_positives_stay_untouched(text: str) -> None:
    r = scrub(text)
    assert r.findings == (), [(f.pattern, text[f.start : f.end]) for f in r.findings]
    assert r.text == text


# ---------------------------------------------------------------- positions, lines, counts


def test_finding_offsets_point_into_the_original_text() -> None:
    for p in planted_set(seed=3, per_kind=1):
        for f in find_secrets(p.text):
            value = p.text[f.start : f.end]
            assert value and not value.startswith((" ", "\n")) and not value.endswith((" ", "\n"))
            assert f.line == p.text.count("\n", 0, f.start) + 1


def test_line_numbers() -> None:
    rng = random.Random(21)
    npm = make_credential("npm", rng).display
    jwt = make_credential("jwt", rng).display
    pem = make_credential("pem", rng)
    text = f"line one\nline two {npm}\n\n## heading\n\ntoken here: {jwt}\n{pem.display}\nend\n"
    found = find_secrets(text)
    assert [(f.pattern, f.line) for f in found] == [("npm-token", 2), ("jwt", 6), ("private-key", 8)]


def test_line_numbers_match_planted_positions() -> None:
    for p in planted_set(seed=8, per_kind=1):
        found = find_secrets(p.text)
        want = first_line_of(p.text, p.secrets)
        assert want in {f.line for f in found}, (p.kind, p.context)


def test_counts() -> None:
    rng = random.Random(4)
    a, b = (make_credential("github", rng).display for _ in range(2))
    text = f"first {a}\nsecond {b}\npassword = 'Hunter2!xyz'\n"
    r = scrub(text)
    assert r.counts == {"github-token": 2, "password-assignment": 1}
    assert sum(r.counts.values()) == len(r.findings)
    assert isinstance(r, Scrubbed) and all(isinstance(f, Finding) for f in r.findings)
    assert scrub("nothing to see here").counts == {}


def test_find_secrets_agrees_with_scrub() -> None:
    for p in planted_set(seed=9, per_kind=1):
        assert tuple(find_secrets(p.text)) == scrub(p.text).findings


# ---------------------------------------------------------------- robustness and speed


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "=" * 50_000,
        "key=" * 20_000,
        "password: " * 20_000,
        "-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 50_000,
        "-----BEGIN PRIVATE KEY-----\n" * 2_000,
        "https://" + "a:" * 20_000 + "@",
        "sk-" * 30_000,
        "eyJ" + "a" * 100_000 + ".",
        "Bearer " * 20_000,
        ("x" * 40 + ":") * 5_000,
    ],
)
def test_no_pathological_slowdown(text: str) -> None:
    t0 = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - t0 < 2.0


def test_prose_throughput_smoke() -> None:
    """A loose guard against regex blow-ups: real throughput is measured by scripts/bench_scrub.py."""
    rng = random.Random(1)
    words = "the of and a to in is you that it he was for on are as with his they at be this from".split()
    para = lambda: " ".join(rng.choice(words) for _ in range(120)) + "."  # noqa: E731
    text = "\n\n".join(para() for _ in range(3000))  # ~2 MB
    t0 = time.perf_counter()
    assert scrub(text).findings == ()
    assert len(text) / 1e6 / (time.perf_counter() - t0) > 5  # MB/s; ~50+ on a laptop


def test_non_ascii_text_keeps_offsets() -> None:
    key = make_credential("github", random.Random(2)).display
    text = f"İstanbul notları — ключ: {key} ✓\npassword = 'Çok3Gizli!'"
    r = scrub(text)
    assert r.text == f"İstanbul notları — ключ: {marker('github-token')} ✓\npassword = '{marker('password-assignment')}'"

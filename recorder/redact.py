"""Redaction of secrets in the stored copy of a session (docs/design.md, "Redaction").

A `Redactor` replaces every secret it finds with a placeholder `REDACTED:<12 hex>`: the first
12 hex digits of HMAC-SHA256(key, secret), where the key is 32 random bytes made when the
Redactor is made and kept in its memory only (never stored). So one secret gets one placeholder
within a recording (replay matching and `--serve` still pair requests), cannot be recovered from
it, and cannot be compared across recordings. The placeholder is ASCII and holds no character a
JSON string would escape; `PLACEHOLDER_RE` matches every placeholder, and a placeholder is never
redacted again (redacting twice gives the same bytes).

Rules (names as recorded in `sessions.redaction`):
- token-shapes: OpenAI/Anthropic/Moonshot-style `sk-...`, AWS `AKIA...`/`ASIA...`, Google `AIza...`,
  GitHub `ghp_/gho_/ghu_/ghs_/ghr_/github_pat_`, GitLab `glpat-`, Slack `xox[bpoas]-`, JWTs,
  PEM private key blocks, and the shapes of the major secret scanners (Stripe, npm, PyPI,
  Docker, SendGrid, Hugging Face, Twilio, Azure AD, ...: `_TOKEN_SHAPES`);
- bearer: the credential after `Bearer ` / `Basic `;
- url-password: the password of `scheme://user:password@host`;
- secret-assignments: `password=...`, `api_key: ...`, `token="..."`, `AWS_SECRET_ACCESS_KEY=...`
  in text (values of 8+ chars; a name that only ends in `key` needs a letter and a digit);
- base64: a base64 run whose decoding is text holding a secret (`_base64`);
- secret-keys: in a JSON payload, every value under a key such as `api_key`, `apiKey`, `token`,
  `access_token`, `secret`, `client_secret`, `password`, `passwd`, `authorization`, `cookie`,
  `set-cookie`, `x-api-key` (case, `-` and `_` ignored);
- env-headers: the values of an `env` or `headers` map (ACP `session/new`/`session/load`
  `mcpServers[].env` / `.headers`, which are lists of {name, value}; MCP configs' dicts) whose
  name says secret or whose value looks like a token;
- env:NAME: the value of the environment variable NAME (names that look secret: `*_KEY`,
  `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, `*PASSWD*`; values of 8+ characters) wherever it appears;
- config:patterns / config:json_paths / config:keys / config:env: the project's own rules
  ([tool.wire-recorder.redact], see recorder.config);
- fragments: a piece of FRAGMENT_MIN+ bytes of a secret this Redactor replaced before (in this
  frame or an earlier one) that is the secret's start right before an ellipsis (`...`, `…`,
  `\u2026`) or its end right after one: what an agent's shortening for display leaves (kimi
  titles tool calls `head...tail`). The secrets are kept in memory only, as the key is.

A frame that parses as JSON is redacted JSON-aware (strings inside; the frame's bytes stay
byte-identical when nothing matched, and only the secrets' bytes change when something did). A
frame that does not parse (invalid JSON or UTF-8, a stderr line) gets the byte rules: token
shapes, bearer, url-password, secret-assignments, base64, env values and config patterns. A
frame over `HUGE_FRAME` bytes is never parsed and gets the byte rules, each bounded: the ones
without a literal to look for first run only in windows around their words (`_sub_near`).
A secret streamed across several frames of one message is the loader's (recorder.redact_stream).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

PLACEHOLDER_PREFIX = b"REDACTED:"
PLACEHOLDER_RE: re.Pattern[bytes] = re.compile(rb"REDACTED:[0-9a-f]{12}")
PLACEHOLDER_TEXT_RE: re.Pattern[str] = re.compile(r"REDACTED:[0-9a-f]{12}")
HUGE_FRAME = 1 << 20  # bytes; larger frames are not parsed as JSON

# Whole match is the secret. Each starts with a literal, so Python's re finds candidates with its
# fast literal search (one alternation with look-behinds took 130 ns a byte); the left boundary
# (no token character before the match) is checked in the replacement instead.
_TOKEN_SHAPES = [
    rb"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{20,}",
    rb"(?:AKIA|ABIA|ACCA|A3T[A-Z0-9])[0-9A-Z]{16}(?![0-9A-Z])",
    rb"ASIA[0-9A-Z]{16}(?![0-9A-Z])",
    rb"AIza[0-9A-Za-z_-]{35}",
    rb"gh[pousr]_[A-Za-z0-9]{30,}",
    rb"github_pat_[A-Za-z0-9_]{22,}",
    rb"glpat-[A-Za-z0-9_-]{20,}",
    rb"xox[bpoasre]-[A-Za-z0-9-]{10,}",
    # possessive: a run of these never ends in `.`, and giving bytes back walked each run of
    # base64 again from every `eyJ` in it
    rb"eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}",
    # the shapes of detect-secrets' and gitleaks' rules for these services (s9 ...)
    rb"[sr]k_(?:live|test)_[0-9A-Za-z]{20,}",  # Stripe secret / restricted keys
    rb"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])",  # npm access token
    rb"pypi-AgE[A-Za-z0-9_-]{50,}",  # PyPI / TestPyPI API token (a macaroon)
    rb"dckr_pat_[A-Za-z0-9_-]{20,}",  # Docker Hub personal access token
    rb"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}",  # SendGrid API key
    rb"hf_[A-Za-z0-9]{30,}",  # Hugging Face user access token
    rb"AC[0-9a-f]{32}(?![0-9A-Za-z])",  # Twilio account SID
    rb"SK[0-9a-f]{32}(?![0-9A-Za-z])",  # Twilio API key SID
    rb"ya29\.[0-9A-Za-z_-]{20,}",  # Google OAuth access token
    rb"xapp-[0-9]-[A-Za-z0-9-]{20,}",  # Slack app-level token
    rb"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}",
    rb"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",  # Azure AD client secret
    rb"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}",  # Square access token / OAuth secret
    rb"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}",  # Shopify tokens
    rb"do[por]_v1_[0-9a-f]{64}",  # DigitalOcean tokens
    rb"AKCp[A-Za-z0-9]{69}",  # Artifactory API key
    rb"gl(?:ptt|dt|rt|soat|ffct|imt|agent|cbt|oas)-[A-Za-z0-9_-]{20,}",  # more GitLab tokens
]
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_PEM = (rb"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.{0,65536}?"
        rb"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_BEARER = rb"(?i:\b(?:bearer|basic))[ \t]+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"
_URL_PASSWORD = (
    rb"\b[A-Za-z][A-Za-z0-9+.-]{1,30}://[^/\s:@\"'<>\\]{1,256}:(?P<secret>[^/\s@\"'<>\\]{1,256})@"
)
_SECRET_WORDS = (
    rb"api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret"
    rb"|secret[_-]?key|private[_-]?key(?:[_-]?id)?|accountkey|sharedaccesskey|password|passwd|secret|token"
    # any other `*_key` name (`AWS_SECRET_ACCESS_KEY`, `stripe-key`): its value must look random
    # (`_key_value_ok`), so `sort_key=created_at` stays
    rb"|key"
)
# A name that says secret by itself; other names ending in `key` need a random-looking value.
_STRONG_NAME = re.compile(rb"api[_-]?key|secret|token|passw|private|access|account|auth")
_ASSIGNMENT_TAIL = rb"\b[\"']?[ \t]*[:=][ \t]*(?:\\?[\"'])?"
_ASSIGNMENT_VALUE = rb"[^\s\"'\\,;&()\[\]{}<>]"
_ASSIGNMENT = (
    rb"(?i:\b(?:[a-z0-9]+[_-])*(?:" + _SECRET_WORDS + rb"))" + _ASSIGNMENT_TAIL
    # possessive, and not followed by a bracket: `token = get_token()` is code, not a secret
    + rb"(?P<secret>" + _ASSIGNMENT_VALUE + rb"{8,}+)(?![(\[{<])"
)
# What every match of _ASSIGNMENT holds after its secret word (each ends in one of these).
_ASSIGNMENT_ENDS = (b"key", b"token", b"secret", b"password", b"passwd", b"keyid", b"key_id",
                    b"key-id")
_ASSIGNMENT_AFTER = re.compile(
    _ASSIGNMENT_TAIL + _ASSIGNMENT_VALUE + rb"{8,}+(?![(\[{<])"
)
_SECRET_WORD_END = re.compile(rb"(?:" + _SECRET_WORDS + rb")\Z")  # on the lowered frame
_SECRET_WORD_MAX = 16  # bytes; the longest secret word is 15 (`sharedaccesskey`)
_ALNUM_TABLE = bytes(1 if chr(c).isascii() and chr(c).isalnum() else 0 for c in range(256))
_WORD_TABLE = bytes(1 if chr(c).isascii() and (chr(c).isalnum() or c == 0x5F) else 0
                    for c in range(256))
# The first look, on the lowered frame: a frame where none of these occur (and no secret env
# value, no `ASIA`, no `@` with `://`) is stored as it is, without any other work. Each branch
# starts at a letter that is rare in JSON text and looks back for the rest: Python's re then skips
# most positions in C, 1.5 us for a 220-byte frame where a plain alternation took 30 us.
_PREFILTER = re.compile(
    rb"k(?:ey(?![a-z0-9_])|(?<=tok)en(?![a-z0-9_])|(?<=cook)ie|-(?:(?<=[^a-z0-9_-]sk-)|(?<=^sk-))|ia(?<=akia))"
    rb"|w(?<=passw)|z(?:(?<=authoriz)|(?<=aiz)a)|c(?<=sec)ret(?![a-z0-9])"
    rb"|b(?:earer|asic)[ \t]|v(?<=\"env)\"|h(?<=\")eaders\""
    rb"|xox[bpoas]-|g(?:h[pousr]_|ithub_pat_|lpat-)|j(?<=eyj)|d(?:(?<=key[_-]id)|(?<=keyid))"
)

# Where a token shape can start. Each search starts at one character that is rare in text and
# JSON (`A`, `J`, `-`, `_`), which re finds with memchr, and looks back for the rest: a frame is
# cleared at several GB/s (one search over a character set runs at ~0.4 GB/s; the lowered-frame
# prefilter above, testing a common letter every few bytes, at ~0.09 GB/s). Each group names the
# shape in `_TOKEN_SHAPES` (`s<index>`; `p` = the PEM block) whose every match holds that anchor,
# so the byte rules run only the shapes whose anchor is in the frame.
_SHAPE_ANCHORS: tuple[tuple[bytes, re.Pattern[bytes]], ...] = tuple(
    (c, re.compile(p))
    for c, p in (
        # the PEM branch first: `sk-----BEGIN ` is a PEM block and cannot be an `sk-` key
        (b"-", rb"-(?:(?=----BEGIN )(?P<p>)|(?<=sk-)(?P<s0>)|(?<=glpat-)(?P<s6>)"
                 rb"|(?<=xox[bpoasre]-)(?P<s7>)|(?<=pypi-)(?P<s11>)|(?<=xapp-)(?P<s18>)"
                 rb"|(?<=sq0atp-)(?P<s21>)|(?<=sq0csp-)(?P<s21b>)|(?<=gl[a-z]{2}-)(?P<s25>)"
                 rb"|(?<=gl[a-z]{3}-)(?P<s25b>)|(?<=gl[a-z]{4}-)(?P<s25c>)"
                 rb"|(?<=gl[a-z]{5}-)(?P<s25d>))"),
        (b"A", rb"A(?:KIA(?P<s1>)|BIA(?P<s1b>)|CCA(?P<s1c>)|3T(?P<s1d>)|SIA(?P<s2>)|Iza(?P<s3>)"
                 rb"|C(?=[0-9a-f]{32})(?P<s15>)|KCp(?P<s24>))"),
        (b"_", rb"_(?:(?<=gh[pousr]_)(?P<s4>)|(?<=github_)(?P<s5>)|(?<=[sr]k_)(?P<s9>)"
                 rb"|(?<=npm_)(?P<s10>)|(?<=dckr_)(?P<s12>)|(?<=hf_)(?P<s14>)"
                 rb"|(?<=shp[a-z]{2}_)(?P<s22>)|(?<=_v1_)(?P<s23>))"),
        (b"J", rb"J(?<=\.eyJ)(?P<s8>)"),  # a JWT's second part: `eyJ` alone is common in base64
        (b".", rb"\.(?:(?<=SG\.)(?P<s13>)|(?<=ya29\.)(?P<s17>)|(?<=hooks\.slack\.)(?P<s19>))"),
        (b"K", rb"K(?<=SK)(?=[0-9a-f]{32})(?P<s16>)"),
        (b"~", rb"~(?<=[0-9]Q~)(?P<s20>)"),
    )
)


# The fragments rule: pieces of FRAGMENT_MIN+ bytes of secrets already replaced, next to an
# ellipsis. 12 bytes of a random secret (60+ bits) do not occur in other text by chance, and an
# agent's `head...tail` shortening to 50 characters keeps up to 25 of each side; shorter pieces
# (a token's public prefix such as `xoxb-470`) are left. Only runs of printable ASCII that JSON
# does not escape are indexed, so a piece reads the same in a frame's bytes and in its text.
FRAGMENT_MIN = 12
# indexed windows per Redactor, ~240 bytes each (15 MB): ~2,000 secrets of 40 characters; the
# secrets replaced after that are not indexed
MAX_WINDOWS = 1 << 16
_FRAGMENT_RUN = re.compile(rb"[!#-\[\]-~]{%d,}" % FRAGMENT_MIN)
_ELLIPSES = ((b".", b"..."), (b"\xe2", "\u2026".encode()), (b"\\", b"\\u2026"))  # (a byte of it, it)


_GROUP_SHAPE = {g: g.rstrip("bcd") for _, rx in _SHAPE_ANCHORS for g in rx.groupindex}


def _find_via(raw: bytes, first: bytes, needle: bytes, start: int) -> int:
    """raw.find(needle, start), found from the byte `first` of it: a find of a few bytes runs at
    ~1.5 GB/s, one of a single byte (memchr) at tens, so where `first` is rare (`.` in a JSON
    frame's `"2.0"`) this is much faster; after 32 misses it is a plain find."""
    at = needle.index(first)
    for _ in range(32):
        i = raw.find(first, start + at)
        if i < 0:
            return -1
        if raw.startswith(needle, i - at):
            return i - at
        start = i - at + 1
    return raw.find(needle, start)


# All anchors in one regex, for small frames: one call where seven memchr and a search for each
# anchor found cost more in Python than a scan of a few KiB (a match consumes the anchor and
# letters only, which no other anchor starts at, so finditer sees every anchor of raw).
_ALL_ANCHORS = re.compile(b"|".join(rx.pattern for _, rx in _SHAPE_ANCHORS))
_ONE_REGEX_MAX = 4096  # bytes


def _may_hold_shape(raw: bytes) -> bool:
    if len(raw) <= _ONE_REGEX_MAX:
        return _ALL_ANCHORS.search(raw) is not None
    return any(c in raw and rx.search(raw) is not None for c, rx in _SHAPE_ANCHORS)


def _shape_hits(raw: bytes) -> set[str | None]:
    """The shapes (`s<index>`, `p`) whose anchors in _SHAPE_ANCHORS are found in raw (a group
    `s1b` is another anchor of shape `s1`)."""
    if len(raw) <= _ONE_REGEX_MAX:
        return {_GROUP_SHAPE.get(g, g) for g in (m.lastgroup or "" for m in
                                                  _ALL_ANCHORS.finditer(raw))}
    return {_GROUP_SHAPE.get(g, g) for c, rx in _SHAPE_ANCHORS if c in raw
            for g in (m.lastgroup or "" for m in rx.finditer(raw))}


# What the context rules need in the lowered frame: every word of `_SECRET_WORDS` holds one of
# _ASSIGNMENT_WORDS.
_BEARER_WORDS = (b"bearer", b"basic")
# The first look on frames over _GATE_BY_WORDS bytes (up to HUGE_FRAME): one literal search per
# word a rule needs (lowered frame), ~0.3 ms a MiB each, where _PREFILTER takes 10-20 ms a MiB on
# text rich in the letters it starts at; it clears fewer frames (`tokens` passes), which the
# anchored rules then handle fast. Small frames keep _PREFILTER (one call beats ten). Between
# _GATE_FIRST and _GATE_BY_WORDS both look, the words first: a frame holding none of them is
# cleared 2-3x faster than by _PREFILTER (20 KB: 60 against 160-230 us), and one holding some is
# still cleared as precisely (each look alone lets through every frame a rule can change, so
# both together do too).
_GATE_FIRST = 1 << 10
_GATE_BY_WORDS = 64 << 10
_GATE_WORDS = tuple(
    re.compile(w)
    for w in (b"key", b"token", b"secret", b"passw", b"authoriz", b"cookie", b"bearer",
              b"basic", b'"env"', b'"headers"')
)
_ASSIGNMENT_WORDS = (b"key", b"token", b"secret", b"passw")

SECRET_KEYS = frozenset(
    {
        "apikey",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "authtoken",
        "apitoken",
        "sessiontoken",
        "secret",
        "clientsecret",
        "secretkey",
        "privatekey",
        "password",
        "passwd",
        "authorization",
        "proxyauthorization",
        "cookie",
        "setcookie",
        "xapikey",
        "xauthtoken",
        "secretaccesskey",
        "awssecretaccesskey",
        "privatekeyid",
        "accountkey",
        "apisecret",
        "appsecret",
        "clientkey",
        "webhooksecret",
    }
)
# env/headers map entries whose name says secret (the others are masked when their value looks
# like a token: `_random_value`)
_SECRET_MAP_NAME = re.compile(
    r"(?i)key|token|secret|passw|pass$|auth(?!or)|credential|cookie|session|signature|private"
    r"|_pat$|^pat$")
MAP_KEYS = frozenset({"env", "headers"})
_SECRET_ENV_NAME = re.compile(r"(?i)(?:_KEY|_TOKEN|_SECRET|PASSWORD|PASSWD|^TOKEN|^SECRET)")
_SECRET_ENV_TAIL = re.compile(r"(?i)(?:_KEY|_TOKEN|_SECRET)$")
MIN_ENV_VALUE = 8  # shorter values of secret-looking variables ('true', '1') are left alone
MIN_CONFIG_ENV_VALUE = 4  # a variable the config names is a secret from this length on


def _norm_key(k: str) -> str:
    return k.lower().replace("_", "").replace("-", "")


def secret_env_names(env: Mapping[str, str]) -> list[str]:
    """Names of env whose values the env:NAME rule masks."""
    return sorted(
        n
        for n, v in env.items()
        if len(v) >= MIN_ENV_VALUE
        and (_SECRET_ENV_TAIL.search(n) or re.search(r"(?i)PASSWORD|PASSWD", n))
        and not PLACEHOLDER_TEXT_RE.fullmatch(v)
    )


class Redactor:
    """The rules of one recording and its placeholder key. Build one with `from_config`."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        env_values: Mapping[str, str] | None = None,
        patterns: list[str] | None = None,
        json_paths: list[str] | None = None,
        keys: list[str] | None = None,
        config_env: list[str] | None = None,
        config_path: str | None = None,
        notes: list[str] | None = None,
        key: bytes | None = None,
    ):
        self.enabled = enabled
        self.config_path = config_path
        self.notes: list[str] = list(notes or [])
        self._key = key or secrets.token_bytes(32)
        self._cache: dict[bytes, bytes] = {}
        # Every FRAGMENT_MIN-byte window of the secrets replaced so far -> (secret part, offset):
        # the fragments rule (`_fragments`). In memory only, like the key.
        self._windows: dict[bytes, list[tuple[bytes, int]]] = {}
        self._n_windows = 0
        self._extra: list[bytes] = []
        self._literal_list: list[bytes] = []
        self.rules: list[str] = []
        if not enabled:
            return
        self.rules = [
            "token-shapes",
            "bearer",
            "url-password",
            "secret-assignments",
            "secret-keys",
            "env-headers",
            "fragments",
        ]
        self._keys = SECRET_KEYS | {_norm_key(k) for k in keys or []}
        self._paths = [self._parse_path(p) for p in json_paths or []]
        # Literal secret values: each also in its JSON-escaped form, longest first so a value
        # that contains another is replaced whole.
        literals: dict[bytes, bytes] = {}
        for name, value in (env_values or {}).items():
            raw = value.encode("utf-8", "surrogateescape")
            literals[raw] = raw
            esc = json.dumps(value)[1:-1].encode("ascii")
            literals.setdefault(esc, raw)
            self.rules.append(f"env:{name}")
        self._literals = literals
        # (regex, bounded: no token character may come right before the match)
        # (anchor group in _SHAPE_ANCHORS, regex, bounded), in the order they are applied
        self._anchored: list[tuple[str, re.Pattern[bytes], bool]] = [
            (f"s{i}", re.compile(p), True) for i, p in enumerate(_TOKEN_SHAPES)
        ] + [("p", re.compile(_PEM, re.S), False)]
        shapes = [(rx, b) for _, rx, b in self._anchored]
        self._literal_rx: re.Pattern[bytes] | None = None
        if literals:
            alts = sorted(literals, key=len, reverse=True)
            self._literal_rx = re.compile(b"|".join(re.escape(a) for a in alts))
            shapes.append((self._literal_rx, False))
        self._shapes = shapes  # the rules that also run on frames over HUGE_FRAME
        self._context = [re.compile(_BEARER), re.compile(_URL_PASSWORD), re.compile(_ASSIGNMENT)]
        self._user_rules = [re.compile(p.encode("utf-8")) for p in patterns or []]
        self._fast = not self._user_rules and not self._paths
        self._extra = [k.lower().encode() for k in keys or []]
        self._literal_list = sorted(literals, key=len, reverse=True)
        if patterns:
            self.rules.append(f"config:patterns({len(patterns)})")
        if json_paths:
            self.rules.append(f"config:json_paths({len(json_paths)})")
        if keys:
            self.rules.append(f"config:keys({len(keys)})")
        if config_env:
            self.rules.append(f"config:env({len(config_env)})")

    # ------------------------------------------------------------------ building

    @classmethod
    def from_config(
        cls,
        project_dir: str | None = None,
        env: Mapping[str, str] | None = None,
        enabled: bool = True,
        *,
        strict: bool = False,
    ) -> Redactor:
        """Built-in rules + the project's config (found from project_dir upwards) + the
        secret-looking values of env (default: os.environ), with a fresh random key.

        A config that cannot be used raises recorder.config.ConfigError when `strict`;
        otherwise the built-in rules run alone and `notes` says why."""
        if not enabled:
            return cls(enabled=False)
        from .config import ConfigError, find_config

        env = os.environ if env is None else env
        notes: list[str] = []
        user: dict[str, list[str]] = {}
        path: str | None = None
        try:
            cfg = find_config(project_dir)
            path = cfg.path
            user = parse_redact_table(cfg.table.get("redact", {}), cfg.path or "config")
        except ConfigError as e:
            if strict:
                raise
            notes.append(f"{e.message}; only the built-in rules ran")
            user = {}
        env_values = {n: env[n] for n in secret_env_names(env)}
        for name in user.get("env", []):
            v = env.get(name)
            if v is not None and len(v) >= MIN_CONFIG_ENV_VALUE:
                env_values[name] = v
        return cls(
            env_values=env_values,
            patterns=user.get("patterns"),
            json_paths=user.get("json_paths"),
            keys=user.get("keys"),
            config_env=user.get("env"),
            config_path=path if user else None,
            notes=notes,
        )

    @staticmethod
    def _parse_path(p: str) -> tuple[str, ...]:
        if p.startswith("$."):
            p = p[2:]
        return tuple(p.split("."))

    def describe(self) -> str:
        """What `sessions.redaction` records: 'off', or JSON {rules, config, notes}."""
        if not self.enabled:
            return "off"
        d: dict[str, Any] = {"rules": self.rules}
        if self.config_path:
            d["config"] = self.config_path
        if self.notes:
            d["notes"] = self.notes
        return json.dumps(d, separators=(",", ":"))

    # ------------------------------------------------------------------ placeholders

    def placeholder(self, secret: bytes) -> bytes:
        ph = self._cache.get(secret)
        if ph is None:
            ph = self._hmac_ph(secret)
            self._cache[secret] = ph
            if len(secret) >= FRAGMENT_MIN:
                self._remember(secret)
        return ph

    def _hmac_ph(self, secret: bytes) -> bytes:
        digest = hmac.new(self._key, secret, hashlib.sha256).hexdigest()[:12]
        return PLACEHOLDER_PREFIX + digest.encode("ascii")

    def _remember(self, secret: bytes) -> None:
        """Index the windows of each run of `_FRAGMENT_CHARS` (FRAGMENT_MIN+ bytes) of secret,
        up to MAX_WINDOWS in all (then later secrets are not indexed)."""
        windows = self._windows
        n = FRAGMENT_MIN
        for m in _FRAGMENT_RUN.finditer(secret):
            part = m.group()
            if part.startswith(PLACEHOLDER_PREFIX):
                continue
            count = len(part) - n + 1
            if self._n_windows + count > MAX_WINDOWS:
                return
            self._n_windows += count
            for o in range(count):
                windows.setdefault(part[o : o + n], []).append((part, o))

    def _fragments(self, raw: bytes) -> bytes:
        """raw with each fragment of a remembered secret next to an ellipsis replaced: the
        secret's first k >= FRAGMENT_MIN bytes right before `...`/`…`, or its last k right
        after one (what an agent's `head...tail` shortening for display leaves)."""
        cuts: list[tuple[int, int]] = []  # (where the ellipsis starts, where it ends)
        for first, ell in _ELLIPSES:
            i = _find_via(raw, first, ell, 0)
            while i >= 0:
                j = i + len(ell)
                if ell == b"...":
                    while raw.startswith(b".", j):
                        j += 1
                cuts.append((i, j))
                i = _find_via(raw, first, ell, j)
        if not cuts:
            return raw
        n = FRAGMENT_MIN
        windows = self._windows
        spans: list[tuple[int, int]] = []
        for e, p in cuts:
            best = 0
            for part, o in windows.get(raw[e - n : e], ()) if e >= n else ():
                k = o + n  # the piece is part[:k], ending at e
                if best < k <= e and raw.startswith(part[:k], e - k):
                    best = k
            if best:
                spans.append((e - best, e))
            best = 0
            for part, o in windows.get(raw[p : p + n], ()):
                k = len(part) - o  # the piece is part[o:], starting at p
                if k > best and raw.startswith(part[o:], p):
                    best = k
            if best:
                spans.append((p, p + best))
        if not spans:
            return raw
        out: list[bytes] = []
        at = 0
        for a, b in sorted(spans):
            if a < at:  # overlaps the previous piece (cannot happen across an ellipsis)
                continue
            out.append(raw[at:a])
            piece = raw[a:b]
            ph = self._cache.get(piece)
            if ph is None:  # not via placeholder(): a piece is not remembered as a secret
                ph = self._cache[piece] = self._hmac_ph(piece)
            out.append(ph)
            at = b
        out.append(raw[at:])
        return b"".join(out)

    def _ph_str(self, secret: str) -> str:
        return self.placeholder(secret.encode("utf-8", "surrogatepass")).decode("ascii")

    # ------------------------------------------------------------------ bytes

    def _subber(self, found: list[bytes], bounded: bool = False) -> Callable[[re.Match[bytes]], bytes]:
        literals = self._literals
        assignment = self._context[2]

        def sub(m: re.Match[bytes]) -> bytes:
            g = "secret" if "secret" in m.re.groupindex else 0
            start, end = m.span(g)
            s = m.string
            if start < 0 or s.startswith(PLACEHOLDER_PREFIX, start):
                return m.group(0)
            if bounded and start > 0 and s[start - 1] in _TOKEN_CHARS:
                return m.group(0)
            value = s[start:end]
            if m.re is assignment and not _key_value_ok(m, value):
                return m.group(0)
            secret = literals.get(value, value) if literals else value
            if g and end - start >= MIN_ENV_VALUE:
                found.append(value)
            m0 = m.start(0)
            return s[m0:start] + self.placeholder(bytes(secret)) + s[end : m.end(0)]

        return sub

    def _has_literal(self, raw: bytes) -> bool:
        return any(v in raw for v in self._literal_list)

    def _may_match(self, raw: bytes) -> bool:
        """False when no built-in rule, secret env value or config key can match raw."""
        if len(raw) > HUGE_FRAME:
            if _may_hold_shape(raw) or self._has_literal(raw):
                return True
            low = raw.lower()
            return any(w in low for w in (*_BEARER_WORDS, *_ASSIGNMENT_WORDS)) or \
                (b"@" in raw and b"://" in raw) or \
                (bool(self._extra) and any(k in low for k in self._extra))
        low = raw.lower()
        if len(raw) > _GATE_FIRST:
            if _may_hold_shape(raw) or (
                    any(w.search(low) is not None for w in _GATE_WORDS)
                    and (len(raw) > _GATE_BY_WORDS or _PREFILTER.search(low) is not None)):
                return True
        elif _PREFILTER.search(low) is not None or _may_hold_shape(raw):
            return True
        if b"ASIA" in raw or (b"@" in raw and b"://" in raw):
            return True
        if self._extra and any(k in low for k in self._extra):
            return True
        return bool(self._literal_list) and self._has_literal(raw)

    def _base64(self, raw: bytes) -> bytes:
        """raw with each base64 run (B64_MIN+ characters, standard or URL-safe alphabet) whose
        decoding is text holding a secret replaced whole (rule `base64`): text in which a byte
        rule finds something, a `user:password` pair, or one token-looking word (`_random_value`).
        Runs that decode to binary (images, hashes, `encrypted` thoughts) or to plain text are
        left.

        Text is bytes 0x20-0x7e, so the first of each 4 characters that encode 3 of them is one
        of `I-Za-f` (a "leader"). Candidates are found in C: in each of the 4 strided views of
        raw, 6 leaders in a row (`find`); most words, hex and paths have none. Only runs holding
        such a place are decoded."""
        if len(raw) < B64_MIN:
            return raw
        t = raw.translate(_B64_TABLE)
        if t.find(_B64_RUN) < 0:  # no run long enough: most frames
            return raw
        starts: set[int] = set()
        for k in range(4):
            v = raw[k::4].translate(_B64_LEAD_TABLE)
            p = v.find(b"LLLLLL")
            while p >= 0:
                i = k + 4 * p
                e = t.find(b" ", i)
                if e < 0:
                    e = len(t)
                starts.add(t.rfind(b" ", 0, i) + 1)
                # on from the end of this run (the next leaders may start another run)
                p = v.find(b"LLLLLL", max(p + 1, (e - k + 3) // 4))
        if not starts:
            return raw
        parts: list[bytes] = []
        at = 0
        for i in sorted(starts):
            if i < at:
                continue
            j = t.find(b" ", i)
            if j < 0:
                j = len(t)
            if j - i >= B64_MIN and self._b64_secret(raw[i:j]):
                parts += [raw[at:i], self.placeholder(raw[i:j])]
                at = j
        if not parts:
            return raw
        parts.append(raw[at:])
        return b"".join(parts)

    def _b64_secret(self, run: bytes) -> bool:
        # Text is bytes 0x20-0x7e: the first of each 4 characters that encode 3 of them is one
        # of `I-Za-f`. This refuses most runs that are not base64 text (words, hex, paths).
        if run[:96:4].translate(None, _B64_LEADERS):
            return False
        body = run.rstrip(b"=")
        if len(body) % 4 == 1 or PLACEHOLDER_PREFIX in run:
            return False
        alt = b"-_" if (b"-" in body or b"_" in body) else None
        if alt is not None and (b"+" in body or b"/" in body):
            return False
        try:
            # the head first: most runs (binary data, hashes) are refused from 48 characters
            head = binascii.a2b_base64(_b64_std(body[:48], alt) + b"==") if len(body) > 48 \
                else b""
            if head and _NOT_TEXT.search(head[:35]):
                return False
            text = binascii.a2b_base64(_b64_std(body, alt) + b"==")
        except (binascii.Error, ValueError):
            return False
        if len(text) < 8 or _NOT_TEXT.search(text):
            return False
        if _CREDENTIAL_PAIR.fullmatch(text):
            return True
        if _random_value(text.decode("ascii", "replace")):
            return True
        return self._byte_rules(text, b64=False) != text

    def _byte_rules(self, raw: bytes, may: bool | None = None, b64: bool = True) -> bytes:
        """raw with the byte rules applied; `may`: what `_may_match(raw)` said, when the caller
        asked it already.

        A rule runs only when what every match of it holds is in raw (a token shape's anchor,
        `bearer`/`basic`, `://` and `@`, a secret word, an env value): each regex would
        otherwise scan the whole frame for nothing, several times per string of a JSON frame.
        The anchors are looked up in raw once; a placeholder put in by an earlier rule holds
        none of them and is never redacted again."""
        out = raw
        found: list[bytes] = []
        if self._may_match(raw) if may is None else may:
            plain, bounded = self._subber(found), self._subber(found, bounded=True)
            hits = _shape_hits(raw)
            for group, rx, b in self._anchored:
                if group in hits:
                    out = rx.sub(bounded if b else plain, out)
            if self._literal_rx is not None and self._has_literal(out):
                out = self._literal_rx.sub(plain, out)
            low = raw.lower()
            bearer, url, assignment = self._context
            if len(raw) <= HUGE_FRAME:
                if any(w in low for w in _BEARER_WORDS):
                    out = bearer.sub(plain, out)
                if b"://" in raw and b"@" in raw:
                    out = url.sub(plain, out)
                if any(w in low for w in _ASSIGNMENT_WORDS):
                    out = _sub_assignments(assignment, plain, out)
            else:
                # Over megabytes a regex without a literal to look for first scans too slowly:
                # each runs only in a window around where its matches must be (the words
                # `bearer`/`basic`, `://`), found by `find`; the assignments are found that way
                # already (one pass per word, no whole-frame fallback).
                if any(w in low for w in _BEARER_WORDS):
                    out = _sub_near(bearer, plain, out, _BEARER_WORDS, 1, _NEAR_AHEAD)
                if b"://" in out and b"@" in out:
                    out = _sub_near(url, plain, out, (b"://",), 40, 520)
                if any(w in low for w in _ASSIGNMENT_WORDS):
                    out = _sub_assignments(assignment, plain, out, fallback=False)
        if self._user_rules:
            plain = self._subber(found)
            for rx in self._user_rules:
                out = rx.sub(plain, out)
        # A secret found by its context (after `Bearer `, `password=`, ...) is a secret in
        # the rest of the frame too.
        for secret in sorted(set(found), key=len, reverse=True):
            out = out.replace(secret, self.placeholder(secret))
        if b64:
            out = self._base64(out)
        return raw if out == raw else out

    def redact_bytes(self, raw: bytes) -> bytes:
        """One frame, stderr line or transcript line. Returns `raw` itself when nothing
        matched."""
        if not self.enabled or not raw:
            return raw
        out = self._rules(raw)
        if self._windows:  # a secret was replaced before: its shortened forms go too
            out = self._fragments(out)
        return out

    def _rules(self, raw: bytes) -> bytes:
        may = self._may_match(raw)
        if self._fast and not may:
            # the hot path: most frames hold nothing any rule looks for (nor base64 text)
            return self._base64(raw)
        out = self._byte_rules(raw, may)
        if len(raw) > HUGE_FRAME or not (may or self._paths):
            return out
        first = out.lstrip()[:1]
        if first not in (b"{", b"["):
            return out
        try:
            obj = json.loads(out)
        except (ValueError, RecursionError):
            return out
        pairs: list[tuple[str, str]] = []
        new = self._walk(obj, (), pairs)
        if new is obj:
            return out
        return self._rewrite(out, new, pairs)

    def _rewrite(self, raw: bytes, new: Any, pairs: list[tuple[str, str]]) -> bytes:
        """The frame's bytes with each masked value replaced in place, so the rest of the
        frame keeps its bytes; re-serialised when that cannot be shown to give `new`.

        A masked value of 8+ characters is a secret wherever it occurs in the frame, so its
        other occurrences are replaced too."""
        longs = {s: ph for s, ph in pairs if len(s) >= MIN_ENV_VALUE}
        if longs:
            new = _replace_strings(new, longs)
        out = raw
        ok = len(longs) == len(set(pairs))
        for secret in sorted(longs, key=len, reverse=True) if ok else ():
            ph = longs[secret].encode("ascii")
            forms = {
                json.dumps(secret)[1:-1].encode("ascii"),
                json.dumps(secret, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass"),
            }
            if not any(f in out for f in forms):
                ok = False
                break
            for f in forms:
                out = out.replace(f, ph)
        if ok:
            try:
                if json.loads(out) == new:
                    return out
            except ValueError:
                pass
        end = raw[len(raw.rstrip()) :]
        text = json.dumps(new, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", "surrogatepass") + end

    # ------------------------------------------------------------------ JSON values

    def _mask(self, v: Any, pairs: list[tuple[str, str]]) -> Any:
        if isinstance(v, str):
            if not v or PLACEHOLDER_TEXT_RE.fullmatch(v):
                return v
            ph = self._ph_str(v)
            pairs.append((v, ph))
            return ph
        if isinstance(v, dict):
            return self._copy_dict(v, lambda k, x: self._mask(x, pairs))
        if isinstance(v, list):
            return self._copy_list(v, lambda i, x: self._mask(x, pairs))
        return v

    def _mask_map(self, v: Any, pairs: list[tuple[str, str]], path: tuple[str, ...]) -> Any:
        """An env/headers map: a dict's values, a list of {name, value}'s values, `N=V`'s V;
        each masked when its name says secret or the value looks like a token, otherwise
        redacted as any string is (so `SHELL=/bin/bash` keeps `/bin/bash`, and so does the rest
        of the frame)."""

        def entry(name: Any, x: Any) -> Any:
            if isinstance(x, str) and (
                    (isinstance(name, str) and _SECRET_MAP_NAME.search(name)) or _random_value(x)):
                return self._mask(x, pairs)
            return self._walk(x, path, pairs)

        if isinstance(v, dict):
            return self._copy_dict(v, entry)
        if isinstance(v, list):

            def item(i: int, x: Any) -> Any:
                if isinstance(x, dict) and "value" in x:
                    return self._copy_dict(
                        x, lambda k, y: entry(x.get("name"), y) if k == "value" else
                        self._walk(y, path, pairs))
                if isinstance(x, str) and "=" in x:
                    name, _, val = x.partition("=")
                    m = entry(name, val)
                    return x if m is val else f"{name}={m}"
                return self._walk(x, path, pairs)

            return self._copy_list(v, item)
        return self._walk(v, path, pairs)

    @staticmethod
    def _copy_dict(d: dict[str, Any], f: Callable[[str, Any], Any]) -> dict[str, Any]:
        out: dict[str, Any] | None = None
        for k, v in d.items():
            nv = f(k, v)
            if nv is not v:
                if out is None:
                    out = dict(d)
                out[k] = nv
        return d if out is None else out

    @staticmethod
    def _copy_list(lst: list[Any], f: Callable[[int, Any], Any]) -> list[Any]:
        out: list[Any] | None = None
        for i, v in enumerate(lst):
            nv = f(i, v)
            if nv is not v:
                if out is None:
                    out = list(lst)
                out[i] = nv
        return lst if out is None else out

    def _path_hit(self, path: tuple[str, ...]) -> bool:
        for p in self._paths:
            if len(p) == len(path) and all(
                a == "*" or a == b for a, b in zip(p, path, strict=True)
            ):
                return True
        return False

    def _walk(self, o: Any, path: tuple[str, ...], pairs: list[tuple[str, str]]) -> Any:
        if isinstance(o, str):
            return self._redact_str(o, pairs)
        if isinstance(o, dict):

            def field(k: str, v: Any) -> Any:
                p = path + (k,) if self._paths else path
                if self._paths and self._path_hit(p):
                    return self._mask(v, pairs)
                if _norm_key(k) in self._keys:
                    return self._mask(v, pairs)
                if k in MAP_KEYS:
                    return self._mask_map(v, pairs, p)
                return self._walk(v, p, pairs)

            return self._copy_dict(o, field)
        if isinstance(o, list):
            return self._copy_list(
                o, lambda i, v: self._walk(v, path + (str(i),) if self._paths else path, pairs)
            )
        return o

    def _redact_str(self, s: str, pairs: list[tuple[str, str]]) -> str:
        b = s.encode("utf-8", "surrogatepass")
        out = self._byte_rules(b)
        if out is b:
            return s
        return out.decode("utf-8", "surrogatepass")

    def redact_json(self, obj: Any) -> Any:
        """A parsed JSON value; returns `obj` itself when nothing matched."""
        if not self.enabled:
            return obj
        return self._walk(obj, (), [])

    def redact_text(self, text: str) -> str:
        """A text (an argv element, a path, a stderr line, a transcript line)."""
        if not self.enabled or not text:
            return text
        b = text.encode("utf-8", "surrogateescape")
        out = self.redact_bytes(b)
        return text if out is b else out.decode("utf-8", "surrogateescape")


def _key_value_ok(m: re.Match[bytes], value: bytes) -> bool:
    """A match of _ASSIGNMENT whose name says secret, or whose value looks random: a name that
    only ends in `key` (`sort_key`, `cache-key`) holds a secret when its value has a letter and
    a digit (`created_at_desc` is left)."""
    if _STRONG_NAME.search(m.string[m.start():m.start("secret")].lower()):
        return True
    return _looks_random(value)


_DIGIT = re.compile(rb"[0-9]")
_LETTER = re.compile(rb"[A-Za-z]")


def _looks_random(value: bytes) -> bool:
    return _DIGIT.search(value) is not None and _LETTER.search(value) is not None


_RANDOM_VALUE = re.compile(r"[A-Za-z0-9_+/=.~-]{16,}")


def _random_value(v: str) -> bool:
    """A value that looks like a token: 16+ characters of a token's alphabet, not a path or a
    dotted name, with a digit, a lower- and an upper-case letter (or 32+ hex digits)."""
    if not _RANDOM_VALUE.fullmatch(v) or v[0] in "/." or v.count("/") > 2:
        return False
    if len(v) >= 32 and all(c in "0123456789abcdefABCDEF" for c in v):
        return True
    return (any(c.isdigit() for c in v) and any(c.islower() for c in v)
            and any(c.isupper() for c in v))


# The base64 rule: runs of B64_MIN+ characters of either alphabet (and `=`) are decoded.
B64_MIN = 24
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_="
_B64_TABLE = bytes(0x61 if c in _B64_ALPHABET else 0x20 for c in range(256))
_B64_RUN = b"a" * B64_MIN
_B64_LEADERS = b"IJKLMNOPQRSTUVWXYZabcdef"
_B64_LEAD_TABLE = bytes(0x4C if c in _B64_LEADERS else 0x20 for c in range(256))
_NOT_TEXT = re.compile(rb"[^\x20-\x7e\t\r\n]")
_CREDENTIAL_PAIR = re.compile(rb"[^\s:]{1,64}:[^\s:]{6,}")  # `user:password` (Basic, docker auth)


def _b64_std(body: bytes, alt: bytes | None) -> bytes:
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    return body.translate(bytes.maketrans(b"-_", b"+/")) if alt else body


def _chain_start(raw: bytes, alnum: bytes, w: int, floor: int) -> int:
    """The last position s, floor <= s <= w, from which `\\b(?:[a-z0-9]+[_-])*` ends at w (w holds
    a letter), or -1. Walking back from w: a non-word byte (or `-`, or the start) before j puts a
    `\\b` at j; an `_` needs a run of letters and digits before it, and the walk goes on from the
    run's start; a letter or digit right before j ends it. alnum: raw.translate(_ALNUM_TABLE)."""
    j = w
    while j >= floor:
        if j == 0 or not _WORD_TABLE[raw[j - 1]]:
            return j
        if raw[j - 1] != 0x5F:  # `_`
            return -1
        p = alnum.rfind(b"\x00", 0, j - 1) + 1
        if p == j - 1:
            return -1
        j = p
    return -1


_NEAR_AHEAD = 8192  # bytes after `bearer` in which its credential must end (frames > 1 MiB)


def _sub_near(rx: re.Pattern[bytes], repl: Callable[[re.Match[bytes]], bytes], raw: bytes,
              needles: tuple[bytes, ...], back: int, ahead: int) -> bytes:
    """rx.sub(repl, raw) for a match that holds one of needles (lower case) at most `back`
    bytes after its start and ends within `ahead` bytes of it: rx searched only in those
    windows, so a frame of megabytes costs a few `find`s."""
    low = raw.lower()
    hits: list[int] = []
    for n in needles:
        i = low.find(n)
        while i >= 0:
            hits.append(i)
            i = low.find(n, i + 1)
    parts: list[bytes] = []
    at = 0
    for i in sorted(hits):
        if i < at:
            continue
        m = rx.search(raw, max(at, i - back), min(len(raw), i + ahead))
        if m is None:
            continue
        parts += [raw[at:m.start()], repl(m)]
        at = m.end()
    if not parts:
        return raw
    parts.append(raw[at:])
    return b"".join(parts)


def _sub_assignments(
    rx: re.Pattern[bytes], repl: Callable[[re.Match[bytes]], bytes], raw: bytes,
    fallback: bool = True,
) -> bytes:
    """rx.sub(repl, raw) for rx = _ASSIGNMENT, found from where its matches must be.

    _ASSIGNMENT has no literal for re to look for first, so re.sub enters the matcher at every
    byte (~50 ns a byte), and from every start in a long `a-a-a-...` run it walks the run again
    (quadratic: 16 KB took 7 s). Every match ends its secret word at one of _ASSIGNMENT_ENDS
    followed by _ASSIGNMENT_AFTER (the rest of the pattern), so: find those, check that a secret
    word ends there and that the word chain before it can start at a `\\b` at or after the end of
    the previous match, and run rx.match once from that start (the start re.sub would reach:
    matches come in the order of their words, a chain cannot cross the `:`/`=` of the one
    before). Should the match not come out, re.sub does the whole frame."""
    low = raw.lower()
    ends: set[int] = set()
    for word in _ASSIGNMENT_ENDS:
        i = low.find(word)
        while i >= 0:
            e = i + len(word)
            if _ASSIGNMENT_AFTER.match(low, e) is not None:
                ends.add(e)
            i = low.find(word, e)
    if not ends:
        return raw
    alnum = low.translate(_ALNUM_TABLE)
    parts: list[bytes] = []
    at = 0
    for e in sorted(ends):
        start = -1
        pos = max(at, e - _SECRET_WORD_MAX)
        while start < 0 and pos < e:
            mw = _SECRET_WORD_END.search(low, pos, e)
            if mw is None:
                break
            start = _chain_start(low, alnum, mw.start(), at)
            pos = mw.start() + 1
        if start < 0:
            continue
        m = rx.match(raw, start)
        if m is None or m.end() <= e:
            if not fallback:
                continue
            return rx.sub(repl, raw)
        parts.append(raw[at:start])
        parts.append(repl(m))
        at = m.end()
    if not parts:
        return raw
    parts.append(raw[at:])
    return b"".join(parts)


def _replace_strings(o: Any, mapping: dict[str, str]) -> Any:
    if isinstance(o, str):
        for secret in sorted(mapping, key=len, reverse=True):
            if secret in o:
                o = o.replace(secret, mapping[secret])
        return o
    if isinstance(o, dict):
        return {_replace_strings(k, mapping): _replace_strings(v, mapping) for k, v in o.items()}
    if isinstance(o, list):
        return [_replace_strings(v, mapping) for v in o]
    return o


def parse_redact_table(table: Any, where: str) -> dict[str, list[str]]:
    """The `redact` table of the config, checked: raises ConfigError naming file and key."""
    from .config import ConfigError

    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.wire-recorder.redact] must be a table")
    out: dict[str, list[str]] = {}
    for k, v in table.items():
        if k not in ("patterns", "json_paths", "env", "keys"):
            raise ConfigError(
                f"{where}: redact.{k}: unknown key",
                "known keys: patterns, json_paths, env, keys",
            )
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise ConfigError(f"{where}: redact.{k}: must be a list of non-empty strings")
        if k == "patterns":
            for p in v:
                try:
                    re.compile(p.encode("utf-8"))
                except re.error as e:
                    raise ConfigError(f"{where}: redact.patterns: {p!r}: {e}") from e
        if k == "json_paths":
            for p in v:
                if any(not seg for seg in (p[2:] if p.startswith("$.") else p).split(".")):
                    raise ConfigError(f"{where}: redact.json_paths: {p!r}: empty segment")
        out[k] = list(v)
    return out

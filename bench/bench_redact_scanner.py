#!/usr/bin/env python3
"""What an established secret scanner says of the redaction rules: detect-secrets 1.5.0 (a dev
and test dependency, never a runtime one) scans each line of a set of planted secrets, in the
clear and after `Redactor.redact_text`.

    .venv/bin/python bench/bench_redact_scanner.py

The lines are the e2e test's planted secrets (tests/harness/secrets.py, each as `name = value`,
as a .env or a config file would hold it) and tests/test_redact.py's scanner shapes (each in the
text it travels in). Neither detect-secrets 1.5.0's nor CredSweeper 1.19.5's source
distribution ships its test corpus (checked with `pip download --no-binary :all:`), so the
scanner's own detectors are the judge here: per detector, the lines it flags in the clear and
how many of those it still flags once redacted (the pattern detectors only: the entropy
detectors flag placeholders and hashes alike, and a public IP is no secret). Also: the lines
no detector flags that the rules redact all the same. Exit 2 when a redacted line is flagged.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SKIP = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}


def lines() -> list[tuple[str, str, str]]:
    """(name, line, secret) of every planted secret."""
    from tests.harness import secrets as sx
    from tests.test_redact import SCANNER_SHAPES

    S = sx.SECRETS
    shown = sx._PRINTED.format(**S).splitlines()  # the .env, ... the Shell prints
    printed = {n: next(ln for ln in shown if S[n] in ln) for n in sx.SCANNER_SHAPES}
    carriers = {  # the text each travels in (tests/harness/secrets.py, PLACES)
        **printed,
        "openai_prompt": sx.WIRE_PROMPT_1.splitlines()[0],
        "openai_argv": f"FAKE_API_KEY={S['openai_argv']}",
        "anthropic_tool_args": sx.WIRE_SHELL.split(";")[0],
        "anthropic_big_frame": f"api key in the log: {S['anthropic_big_frame']}",
        "aws_tool_output": S["aws_tool_output"],
        "github_stderr": sx.WIRE_STDERR_LINE,
        "env_token": f"WR_DEPLOY_TOKEN={S['env_token']}",
        "db_url_password": sx.DB_URL,
        "jwt_agent_text": sx.WIRE_AGENT_TEXT,
        "gitlab_prompt": sx.ACP_PROMPT,
        "slack_shell": sx.ACP_SHELL,
        "bearer_header": f"Authorization: Bearer {S['bearer_header']}",
        "header_api_key": f"X-Api-Key: {S['header_api_key']}",
        "mcp_env_password": f"SERVICE_PASSWORD={S['mcp_env_password']}",
        "mcp_env_github": f"GITHUB_PERSONAL_ACCESS_TOKEN={S['mcp_env_github']}",
        "anthropic_acp_argv": f"ANTHROPIC_API_KEY={S['anthropic_acp_argv']}",
        "jwt_sampling": sx.MCP_QUESTION,
        "client_api_key": f"api_key: {S['client_api_key']}",
        "client_password": f"password: {S['client_password']}",
        "client_authorization": f"authorization: Basic {S['client_authorization']}",
        "env_secret": f"WR_SIGNING_SECRET={S['env_secret']}",
        "aws_stderr": f"warning: key {S['aws_stderr']}",
        "moonshot_split_text": f"The model key was: {S['moonshot_split_text']} (rotated).",
    }
    out = [(f"e2e:{n}", carriers.get(n, v), v) for n, v in S.items()]
    out += [(f"unit:{n}", text, secret) for n, (text, secret) in SCANNER_SHAPES.items()]
    return out


def main() -> int:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    from wire_recorder.recorder.redact import PLACEHOLDER_RE, Redactor

    r = Redactor(env_values={})
    flagged_clear: Counter[str] = Counter()
    flagged_after: Counter[str] = Counter()
    only_ours: list[str] = []
    kept: list[str] = []
    bad: list[str] = []
    with default_settings():
        def flags(text: str) -> set[str]:
            found = set()
            for part in text.splitlines() or [text]:
                for s in scan_line(part):
                    value = (s.secret_value or "").strip("\"'")
                    if s.type not in SKIP and not PLACEHOLDER_RE.fullmatch(value.encode()):
                        found.add(s.type)
            return found

        items = lines()
        for name, line, secret in items:
            red = r.redact_text(line)
            before, after = flags(line), flags(red)
            for t in before:
                flagged_clear[t] += 1
            for t in after:
                flagged_after[t] += 1
                bad.append(f"{name}: {t}")
            if secret in red:
                kept.append(name)
            elif not before:
                only_ours.append(name)
    n = len(items)
    hit = sum(1 for _, line, _ in items if flags_any(line, scan_line))
    print(f"detect-secrets 1.5.0 over {n} planted secrets: {hit} lines flagged in the clear, "
          f"{len(bad)} flags left after redaction")
    for t in sorted(flagged_clear):
        print(f"  {t:32s} flags {flagged_clear[t]:3d} in the clear, {flagged_after[t]} redacted")
    print(f"redacted though no detector flags them: {len(only_ours)} ({', '.join(only_ours)})")
    print(f"secrets kept by the rules: {len(kept)} {kept}")
    if bad:
        print("still flagged: " + "; ".join(bad))
    return 2 if bad or kept else 0


def flags_any(line: str, scan_line) -> bool:
    return any(s.type not in SKIP for part in line.splitlines() or [line] for s in scan_line(part))


if __name__ == "__main__":
    from detect_secrets.settings import default_settings

    with default_settings():
        sys.exit(main())

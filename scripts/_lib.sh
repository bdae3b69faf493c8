# Shared by scripts/setup, setup-peers, demo and test. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# bold on a terminal only: a log file gets no escape codes
if [ -t 2 ]; then say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
else say() { printf '==> %s\n' "$*" >&2; }; fi
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# pip prints a warning per unreachable mirror folder on some machines; keep the log readable.
quiet_pip() { { "$@" 2>&1; } | { grep -v 'is ignored: it is neither a file nor a directory' || true; }; }

# A Python interpreter of at least $1 (e.g. 3.11): $2 if given, then pythonX.Y on PATH, then pyenv.
find_python() {
  local want="$1" override="${2:-}" cand
  local check="import sys; sys.exit(0 if sys.version_info >= tuple(map(int, '$want'.split('.'))) else 1)"
  for cand in $override python3.13 python3.12 python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "$check" 2>/dev/null; then
      command -v "$cand"; return 0
    fi
  done
  local root; root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for cand in "$root"/versions/3.1[3-9]*/bin/python "$root"/versions/3.1[1-2]*/bin/python; do
    if [ -x "$cand" ] && "$cand" -c "$check" 2>/dev/null; then echo "$cand"; return 0; fi
  done
  return 1
}

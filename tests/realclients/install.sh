#!/usr/bin/env bash
# Install the real agent CLIs for the real-client tests (docs/real-clients.md):
#   tests/realclients/install.sh [DEST]      (default: .cache/real-clients, gitignored)
# npm packages into DEST/node_modules, aider into DEST/aider-venv. Each ships its own
# binary inside its package: nothing is fetched from outside the package registries.
# The versions are the fixtures' (tests/fixtures/real-cli/<tool>-<version>); set
# CONVLOG_REAL_CLIENTS_LATEST=1 to take the newest the registries serve (to regenerate).
# CONVLOG_REAL_CLIENTS_ONLY="claude-code codex" installs only those (CI: what the live
# tests run; aider's pip install alone takes minutes).
# Idempotent: a client already installed at its version is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${1:-$root/.cache/real-clients}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"

version() {  # the version of <tool> among the checked-in fixtures, or "latest"
    if [ "${CONVLOG_REAL_CLIENTS_LATEST:-}" = 1 ]; then echo latest; return; fi
    local found
    found="$(ls -d "$root/tests/fixtures/real-cli/$1"-[0-9]* 2>/dev/null | sort -V | tail -1)"
    if [ -n "$found" ]; then echo "${found##*-}"; else echo latest; fi
}

wanted() {  # whether <tool> is to be installed
    [ -z "${CONVLOG_REAL_CLIENTS_ONLY:-}" ] || [[ " $CONVLOG_REAL_CLIENTS_ONLY " == *" $1 "* ]]
}
packages=()
wanted claude-code && packages+=("@anthropic-ai/claude-code@$(version claude-code)")
wanted codex && packages+=("@openai/codex@$(version codex)")
wanted gemini-cli && packages+=("@google/gemini-cli@$(version gemini-cli)")
wanted opencode && packages+=("opencode-ai@$(version opencode)")
if ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
    else
        echo "install.sh: npm is missing" >&2; exit 1
    fi
fi
want="$(printf '%s\n' "${packages[@]}")"
if [ "${#packages[@]}" -gt 0 ] && [ "$(cat "$dest/.installed-npm" 2>/dev/null)" != "$want" ]; then
    npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "${packages[@]}"
    # npm 11 may skip Claude Code's postinstall, which puts its native binary in place
    if wanted claude-code && ! "$dest/node_modules/.bin/claude" --version >/dev/null 2>&1; then
        node "$dest/node_modules/@anthropic-ai/claude-code/install.cjs"
    fi
    echo "$want" > "$dest/.installed-npm"
fi

aider="aider-chat"
if [ "$(version aider)" != latest ]; then aider="aider-chat==$(version aider)"; fi
if wanted aider && [ "$(cat "$dest/.installed-aider" 2>/dev/null)" != "$aider" ]; then
    python3 -m venv "$dest/aider-venv"
    "$dest/aider-venv/bin/pip" install --quiet --disable-pip-version-check "$aider"
    echo "$aider" > "$dest/.installed-aider"
fi
for bin in node_modules/.bin/claude node_modules/.bin/codex node_modules/.bin/gemini \
           node_modules/.bin/opencode aider-venv/bin/aider; do
    if [ -x "$dest/$bin" ]; then echo "$bin: $("$dest/$bin" --version 2>/dev/null | tail -1)"; fi
done

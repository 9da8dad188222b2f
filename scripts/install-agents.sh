#!/usr/bin/env bash
# install-agents.sh installs the third-party coding agents that the ACP
# adapter tests run against, at pinned versions, into .cache/agents of the
# repository (ignored by git). It needs npm; without npm, or when the npm
# registry cannot be reached, it says so, and the tests that need an agent
# skip with a message naming this script. It then exits 0, or 1 in strict
# mode (SHARD_TEST_STRICT=1, set by .ci/run), where those tests fail.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.cache/agents
# Pinned versions: the tests' fake model servers speak the wire format these
# releases use.
pkgs=(
  "@zed-industries/codex-acp@0.16.0"
  "@mariozechner/pi-coding-agent@0.73.1"
  "@google/gemini-cli@0.61.0"
  "@zed-industries/claude-agent-acp@0.23.1"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
  "acpx@0.19.1"
)
# not_installed says why the agents are missing and exits (see above).
not_installed() {
  if [ -n "${SHARD_TEST_STRICT:-}" ] && [ "${SHARD_TEST_STRICT}" != 0 ]; then
    echo "install-agents: $1; strict mode: the third-party agent tests will fail" >&2
    exit 1
  fi
  echo "install-agents: $1; the third-party agent tests will skip"
  exit 0
}
if ! command -v npm >/dev/null 2>&1; then
  not_installed "npm not found"
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkgs[@]}" >"$dir/install.log" 2>&1; then
  not_installed "npm install failed (registry unreachable?); see $dir/install.log"
fi
echo "install-agents: installed ${pkgs[*]} into $dir"

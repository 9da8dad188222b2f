#!/usr/bin/env bash
# install-agents.sh installs the third-party coding agents that the ACP
# adapter tests run against, at pinned versions, into .cache/agents of the
# repository (ignored by git). It needs npm; without npm, or when the npm
# registry cannot be reached, it says so and exits 0, and the tests that need
# an agent skip with a message naming this script.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.cache/agents
# Pinned versions: the tests' fake model servers speak the wire format these
# releases use.
pkgs=(
  "@zed-industries/codex-acp@0.16.0"
  "@mariozechner/pi-coding-agent@0.73.1"
)
if ! command -v npm >/dev/null 2>&1; then
  echo "install-agents: npm not found; the third-party agent tests will skip"
  exit 0
fi
mkdir -p "$dir"
if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${pkgs[@]}" >"$dir/install.log" 2>&1; then
  echo "install-agents: npm install failed (registry unreachable?); see $dir/install.log; the third-party agent tests will skip"
  exit 0
fi
echo "install-agents: installed ${pkgs[*]} into $dir"

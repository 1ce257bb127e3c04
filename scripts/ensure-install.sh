#!/bin/sh
# Installs the workspace when it is missing or the lockfile changed since the last install.
# Runs before `npm start`, `npm test` and the admin CLI so a fresh clone needs nothing else.
set -e
cd "$(dirname "$0")/.."
stamp=node_modules/.install-stamp
lock=pnpm-lock.yaml
if [ -f "$stamp" ] && [ -f "$lock" ] && [ ! "$lock" -nt "$stamp" ] && [ ! package.json -nt "$stamp" ]; then
  exit 0
fi
echo "installing workspace dependencies..." >&2
if [ -f "$lock" ] && [ -n "$CI" ]; then
  npx -y pnpm@10.34.8 install --frozen-lockfile >&2
else
  npx -y pnpm@10.34.8 install >&2
fi
touch "$stamp"

#!/bin/sh
# Type-checks every workspace project, tests included (jest strips types without checking them).
cd "$(dirname "$0")/.."
ls -d packages/*/tsconfig.json services/*/tsconfig.json tests-e2e/tsconfig.json 2>/dev/null \
  | xargs -P 2 -I{} sh -c 'tsc -p {} --noEmit || { echo "type errors in {}" >&2; exit 255; }'

#!/usr/bin/env bash
# Generates the SQL of a new Prisma migration for a service, without Prisma's native schema
# engine (none can be downloaded here): `prisma migrate diff` of Prisma 6.19 (root devDependencies
# `prisma-legacy` and `prisma-legacy-adapter-pg`) with its JavaScript schema engine (`engine: "js"`)
# on @prisma/adapter-pg 6.19.
#
# Usage:
#   scripts/migration-diff.sh [--print] <service-dir> <migration-name>
#
#   <service-dir>     e.g. services/gateway; reads <service-dir>/prisma/schema.prisma (or a
#                     multi-file <service-dir>/prisma/schema/ folder) and the existing migrations
#                     in <service-dir>/prisma/migrations/<timestamp>_<name>/migration.sql.
#   <migration-name>  e.g. add_meter_readings (lower-cased, other characters become "_").
#   --print           print the SQL to stdout instead of writing a migration folder.
#
# What it does: replays the existing migrations into a throw-away "shadow" database and diffs
# that state against the schema, exactly like `prisma migrate dev --create-only` (with no
# migrations yet, the result is the whole schema from empty). The SQL is written to
# <service-dir>/prisma/migrations/<UTC yyyymmddHHMMSS>_<migration-name>/migration.sql (plus
# migration_lock.toml if missing) and the path printed; review it, commit it, and the service
# applies it at start (@fleet/db migrate). When the schema matches the migrations, nothing is
# written and the script says so (exit 0).
#
# Needs a PostgreSQL server where it may create and drop a database:
#   MIGRATION_DIFF_DATABASE_URL  server to use (default postgresql://postgres@127.0.0.1:5432/postgres).
#                                Only its host, port and credentials matter; the shadow database
#                                `migration_diff_shadow_*` is dropped on exit.
# The Prisma 7 schema (generator "prisma-client", datasource without url) is adapted in a
# temporary copy (generator "prisma-client-js", url = env("DATABASE_URL")); the service folder
# is only written to when the migration is created.
set -euo pipefail

die() { echo "migration-diff: $*" >&2; exit 1; }

print_only=0
if [ "${1:-}" = "--print" ]; then print_only=1; shift; fi
[ $# -eq 2 ] || die "usage: scripts/migration-diff.sh [--print] <service-dir> <migration-name>"

repo_root=$(cd "$(dirname "$0")/.." && pwd)
service_dir=$(cd "$1" 2>/dev/null && pwd) || die "no such service directory: $1"
slug=$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/_/g; s/^_+//; s/_+$//')
[ -n "$slug" ] || die "the migration name must contain letters or digits"

export PATH="$repo_root/node_modules/.bin:$PATH"
prisma_cli="$repo_root/node_modules/prisma-legacy/build/index.js"
[ -f "$prisma_cli" ] || die "prisma-legacy (Prisma 6.19) is not installed: run npx pnpm@10.34.8 install"
# Prisma 6.19's schema engine needs the adapter of the same version (root devDependency alias).
adapter_pkg=$(cd "$repo_root" && node -p "require.resolve('prisma-legacy-adapter-pg')" 2>/dev/null) \
  || die "prisma-legacy-adapter-pg (@prisma/adapter-pg 6.19) is not installed: run npx pnpm@10.34.8 install"
pg_pkg=$(node -p "require.resolve('pg', { paths: [require('path').dirname('$adapter_pkg')] })") || die "pg not found"

migrations_dir="$service_dir/prisma/migrations"
if [ -f "$service_dir/prisma/schema.prisma" ]; then
  schema_src="$service_dir/prisma/schema.prisma"
elif [ -d "$service_dir/prisma/schema" ]; then
  schema_src="$service_dir/prisma/schema"
else
  die "no prisma/schema.prisma (or prisma/schema/ folder) in $service_dir"
fi

server_url="${MIGRATION_DIFF_DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/postgres}"
shadow_db="migration_diff_shadow_$(date -u +%Y%m%d%H%M%S)_$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/migration-diff.XXXXXX")

# Small Node helper: drop the shadow database (idempotent).
drop_shadow() {
  SERVER_URL="$server_url" SHADOW_DB="$shadow_db" PG_PKG="$pg_pkg" node -e '
    const { Client } = require(process.env.PG_PKG);
    const url = new URL(process.env.SERVER_URL); url.pathname = "/postgres";
    const c = new Client({ connectionString: url.toString() });
    c.connect()
      .then(() => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(process.env.SHADOW_DB)} WITH (FORCE)`))
      .catch((e) => console.error("migration-diff: could not drop " + process.env.SHADOW_DB + ": " + e.message))
      .finally(() => c.end().catch(() => {}));
  ' || true
}
cleanup() { drop_shadow; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. A Prisma 6.19 copy of the schema: generator prisma-client-js, datasource url from the env.
mkdir -p "$work/schema"
SRC="$schema_src" DEST="$work/schema" node -e '
  const fs = require("fs"), path = require("path");
  const src = process.env.SRC, dest = process.env.DEST;
  const files = fs.statSync(src).isDirectory()
    ? fs.readdirSync(src, { recursive: true }).filter((f) => f.endsWith(".prisma")).map((f) => path.join(src, f))
    : [src];
  let generatorKept = false, datasources = 0;
  for (const file of files) {
    let text = fs.readFileSync(file, "utf8");
    text = text.replace(/^generator\s+\w+\s*\{[\s\S]*?^\}/gm, (block) => {
      if (generatorKept) return "";
      generatorKept = true;
      const preview = block.match(/^\s*previewFeatures\s*=.*$/m);
      return `generator client {\n  provider = "prisma-client-js"\n${preview ? preview[0] + "\n" : ""}}`;
    });
    text = text.replace(/^(datasource\s+\w+\s*\{)([\s\S]*?^\})/gm, (_m, head, body) => {
      datasources++;
      body = body.replace(/^\s*(url|directUrl|shadowDatabaseUrl)\s*=.*\n/gm, "");
      return `${head}\n  url = env("DATABASE_URL")${body.startsWith("\n") ? "" : "\n"}${body}`;
    });
    const rel = src === file ? path.basename(file) : path.relative(src, file);
    fs.mkdirSync(path.dirname(path.join(dest, rel)), { recursive: true });
    fs.writeFileSync(path.join(dest, rel), text);
  }
  if (datasources !== 1) { console.error(`migration-diff: expected one datasource block, found ${datasources}`); process.exit(1); }
'
if [ -d "$schema_src" ]; then schema_arg="$work/schema"; else schema_arg="$work/schema/schema.prisma"; fi

# 2. A copy of the existing migrations (Prisma needs migration_lock.toml to know the provider).
mkdir -p "$work/migrations"
last_existing=""
if [ -d "$migrations_dir" ]; then
  for d in "$migrations_dir"/*/; do
    [ -f "$d/migration.sql" ] || continue
    name=$(basename "$d")
    mkdir -p "$work/migrations/$name"
    cp "$d/migration.sql" "$work/migrations/$name/"
    last_existing="$name"
  done
fi
printf 'provider = "postgresql"\n' > "$work/migrations/migration_lock.toml"

# 3. Prisma config: JS schema engine on @prisma/adapter-pg; the shadow database is our own,
#    created here and dropped by this script (the adapter would use a random name).
cat > "$work/prisma.config.js" <<'EOF'
const path = require('path');
const { PrismaPg } = require(process.env.MD_ADAPTER_PKG);
const { Client } = require(process.env.MD_PG_PKG);
// The schema engine's catalog queries return system types the adapter rejects ("Column type
// 'name' could not be deserialized"). node-postgres hands them over as strings anyway: report
// them as text (arrays as text[]) before the adapter looks at the column types.
const Result = require(path.join(path.dirname(process.env.MD_PG_PKG), 'result.js'));
const AS_TEXT = new Set([18, 19, 22, 24, 30, 194, 1033, 2202, 2203, 2204, 2205, 2206, 3734, 3769, 4089, 4096]);
const AS_TEXT_ARRAY = new Set([1003, 1006, 1008, 1013, 1034, 2207, 2208, 2209, 2210, 2211, 3735, 3770, 4090, 4097]);
const addFields = Result.prototype.addFields;
Result.prototype.addFields = function (fields) {
  for (const f of fields) {
    if (AS_TEXT.has(f.dataTypeID)) f.dataTypeID = 25;
    else if (AS_TEXT_ARRAY.has(f.dataTypeID)) f.dataTypeID = 1009;
  }
  return addFields.call(this, fields);
};
const u = new URL(process.env.DATABASE_URL);
const conn = {
  host: u.hostname.replace(/^\[|\]$/g, '') || undefined,
  port: u.port ? Number(u.port) : 5432,
  user: decodeURIComponent(u.username) || undefined,
  password: u.password ? decodeURIComponent(u.password) : undefined,
  database: decodeURIComponent(u.pathname.slice(1)) || 'postgres',
};
async function admin(sql) {
  const c = new Client({ ...conn, database: 'postgres' });
  await c.connect();
  try { await c.query(sql(c)); } finally { await c.end(); }
}
module.exports = {
  experimental: { adapter: true },
  engine: 'js',
  schema: process.env.MD_SCHEMA,
  adapter: async () => {
    const factory = new PrismaPg(conn);
    const shadow = process.env.MD_SHADOW_DB;
    factory.connectToShadowDb = async () => {
      await admin((c) => `CREATE DATABASE ${c.escapeIdentifier(shadow)}`);
      const adapter = await new PrismaPg({ ...conn, database: shadow }).connect();
      const dispose = adapter.dispose.bind(adapter);
      adapter.dispose = async () => {
        await dispose();
        await admin((c) => `DROP DATABASE IF EXISTS ${c.escapeIdentifier(shadow)} WITH (FORCE)`);
      };
      return adapter;
    };
    return factory;
  },
};
EOF

# 4. The diff. Exit code 0: no changes, 2: changes, anything else: error.
set +e
(
  cd "$work"
  export DATABASE_URL="$server_url" MD_ADAPTER_PKG="$adapter_pkg" MD_PG_PKG="$pg_pkg" \
    MD_SCHEMA="$schema_arg" MD_SHADOW_DB="$shadow_db" \
    PRISMA_QUERY_ENGINE_LIBRARY="$prisma_cli" PRISMA_SCHEMA_ENGINE_BINARY="$prisma_cli" \
    CHECKPOINT_DISABLE=1 PRISMA_HIDE_UPDATE_MESSAGE=1 PRISMA_DISABLE_WARNINGS=1
  node "$prisma_cli" migrate diff --config "$work/prisma.config.js" \
    --from-migrations "$work/migrations" --to-schema-datamodel "$schema_arg" \
    --script --exit-code --output "$work/migration.sql"
) >"$work/prisma.log" 2>&1
status=$?
set -e
case $status in
  0) echo "migration-diff: the schema matches the existing migrations; nothing to generate." >&2; exit 0 ;;
  2) ;;
  *) cat "$work/prisma.log" >&2; die "prisma migrate diff failed (exit $status)" ;;
esac

if [ "$print_only" = 1 ]; then cat "$work/migration.sql"; exit 0; fi

# 5. The new folder, named after the current UTC time; never sorting before an existing one.
stamp=$(LAST="$last_existing" node -e '
  const fmt = (d) => d.toISOString().replace(/\D/g, "").slice(0, 14);
  let t = new Date();
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})_/.exec(process.env.LAST);
  if (m) {
    const last = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
    if (fmt(t) <= fmt(last)) t = new Date(last.getTime() + 1000);
  }
  console.log(fmt(t));
')
target="$migrations_dir/${stamp}_${slug}"
[ -e "$target" ] && die "$target already exists"
mkdir -p "$target"
cp "$work/migration.sql" "$target/migration.sql"
if [ ! -f "$migrations_dir/migration_lock.toml" ]; then
  printf '# Please do not edit this file manually\n# It should be added in your version-control system (e.g., Git)\nprovider = "postgresql"\n' \
    > "$migrations_dir/migration_lock.toml"
fi
echo "$target/migration.sql"

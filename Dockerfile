# syntax=docker/dockerfile:1
#
# One image per service, all from this file:
#   docker build --build-arg SERVICE=gateway -t fleet/gateway .
# SERVICE is one of: gateway, device-registry, light-command, config-alerting, meter,
# system-files, mqtt-bridge, events (the folder under services/, package @fleet/<SERVICE>).
# See docs/deployment.md.

ARG NODE_IMAGE=node:24-bookworm-slim
ARG PNPM_VERSION=10.34.8

# ---------------------------------------------------------------------------------------
# build: install the workspace, build the service and its workspace packages, then cut a
# self-contained runtime tree (/out) with `pnpm deploy`.
# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
ARG SERVICE
ARG PNPM_VERSION

# Fail early, with a readable message, on a missing or misspelt service name.
RUN case "${SERVICE}" in \
      gateway|device-registry|light-command|config-alerting|meter|system-files|mqtt-bridge|events) ;; \
      *) echo "build with --build-arg SERVICE=<gateway|device-registry|light-command|config-alerting|meter|system-files|mqtt-bridge|events> (got '${SERVICE}')" >&2; exit 1 ;; \
    esac

# pnpm from the npm registry at the version package.json pins (no corepack).
RUN npm install --global "pnpm@${PNPM_VERSION}" && pnpm --version

# CI=true: pnpm never prompts and never rewrites the lockfile.
ENV CI=true
WORKDIR /repo

# Download every package named in the lockfile first: this layer depends on the lockfile
# only, so editing source code does not download the registry again.
# The patches go with them: pnpm reads the patch files pnpm-workspace.yaml names during the fetch.
COPY pnpm-lock.yaml pnpm-workspace.yaml .npmrc ./
COPY patches ./patches
RUN pnpm fetch

COPY . .
# --prefer-offline uses the packages fetched above and still reaches the registry for
# anything the fetch did not cover. Install scripts run only for the packages that
# pnpm-workspace.yaml allows (onlyBuiltDependencies).
RUN pnpm install --frozen-lockfile --prefer-offline

# `...` builds the service's workspace dependencies (packages/*) first, in dependency order;
# --filter-prod follows production dependencies only, so test helpers (@fleet/test-kit, a
# devDependency) are neither built nor shipped. `prisma generate` (services that own a
# database) needs neither a database nor a schema engine: the build script points
# PRISMA_SCHEMA_ENGINE_BINARY at an existing file. The placeholder DATABASE_URL only
# satisfies a prisma.config.ts that insists on one; nothing connects to it and it does not
# reach the runtime image.
RUN DATABASE_URL="postgresql://build@127.0.0.1:5432/build" \
    pnpm --filter-prod "@fleet/${SERVICE}..." run build

# A runtime tree with production dependencies only: the service's files (dist/, prisma/
# migrations read at start) plus node_modules where the workspace packages are copied in
# with their dist/. --legacy: pnpm 10's default deploy needs inject-workspace-packages=true,
# which this workspace does not set (it would change how every workspace link resolves).
RUN pnpm --filter "@fleet/${SERVICE}" deploy --prod --legacy /out

# pnpm deploy chooses files the way `npm pack` does; a .gitignore or "files" field in a
# package could drop dist/. Copy the service's build output explicitly and then prove that
# the tree is complete: the entry point, the migrations folder when the service has one, and
# every @fleet/* dependency resolving to a built file.
RUN mkdir -p /out/dist && cp -a "services/${SERVICE}/dist/." /out/dist/ \
 && if [ -d "services/${SERVICE}/prisma" ]; then mkdir -p /out/prisma && cp -a "services/${SERVICE}/prisma/." /out/prisma/; fi \
 && cd /out \
 && node -e ' \
      const fs = require("node:fs"); \
      const pkg = require("/out/package.json"); \
      if (!fs.existsSync("/out/dist/main.js")) throw new Error("dist/main.js missing"); \
      for (const name of Object.keys(pkg.dependencies || {}).filter((n) => n.startsWith("@fleet/"))) { \
        const file = require.resolve(name, { paths: ["/out"] }); \
        if (!fs.existsSync(file)) throw new Error(name + " resolves to missing " + file); \
        console.log("ok", name, "->", file); \
      }'

# ---------------------------------------------------------------------------------------
# runtime: Node 24 and the deployed tree, nothing else (no pnpm, no compilers, no sources
# of other services). Code is owned by root and read-only for the `node` user.
# ---------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ARG SERVICE

LABEL org.opencontainers.image.title="fleet-${SERVICE}" \
      org.opencontainers.image.description="Partner device fleet: ${SERVICE} service"

ENV NODE_ENV=production \
    HEALTH_PORT=9000

WORKDIR /app
COPY --from=build /out/ ./

# Writable place for services that keep files (system-files: FILE_STORAGE_DIR=/var/lib/fleet/files,
# mounted as a volume in compose and Kubernetes). Empty and unused by the other services.
RUN mkdir -p /var/lib/fleet/files && chown -R node:node /var/lib/fleet

USER node

# 9000: /healthz and /readyz for every service. The gateway also listens on GATEWAY_PORT (8080).
EXPOSE 9000

# Liveness for plain Docker/compose. The slim image has no curl: use Node's fetch.
# Exec form, so HEALTH_PORT is read from the environment at check time.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.HEALTH_PORT || '9000') + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# Node is PID 1 and handles SIGTERM itself (service-kit drains the bus, then closes).
CMD ["node", "dist/main.js"]

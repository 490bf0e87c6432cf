# syntax=docker/dockerfile:1
# The platform's image: one image for the api and the worker, compiled
# JavaScript on Node 24 (no TypeScript compiler, tsx or esbuild inside).
#   docker build -t agent-platform .
#   api (default):  docker run ... agent-platform
#   worker:         docker run ... agent-platform node dist/workers/runner.js
#   migrations:     docker run ... agent-platform node dist/ops/migrate.js

# Build stage: every dependency (the compiler too), then `npm run build`
# writes dist/, then the development dependencies are pruned away.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY api ./api
COPY core ./core
COPY workers ./workers
COPY schedules ./schedules
COPY ops ./ops
COPY sql ./sql
# Graphile Worker 0.17 reaches TypeScript through cosmiconfig's optional peer
# (for .ts configuration files, which we have none of), so npm keeps it: removed.
RUN npm run build && npm prune --omit=dev --no-audit --no-fund && rm -rf node_modules/typescript

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/.data \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The unprivileged user of the node image; the code stays root-owned (read-only to it).
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
# node itself is the process (no npm in between): SIGTERM reaches it and it
# drains (SHUTDOWN_TIMEOUT_MS) before exiting; source maps name TypeScript lines.
CMD ["node", "--enable-source-maps", "dist/api/server.js"]

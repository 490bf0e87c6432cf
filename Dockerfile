# syntax=docker/dockerfile:1
# The platform's image: one image for the api and the worker.
#   docker build -t agent-platform .
#   api (default):  docker run ... agent-platform
#   worker:         docker run ... agent-platform npm run start:worker
#   migrations:     docker run ... agent-platform npm run migrate
# TypeScript runs through tsx, a runtime dependency, so there is no build step
# and `npm ci --omit=dev` installs everything the processes need.

FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/.data \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json tsconfig.json ./
COPY api ./api
COPY core ./core
COPY workers ./workers
COPY schedules ./schedules
COPY ops ./ops
COPY sql ./sql
# The unprivileged user of the node image; the code stays root-owned (read-only to it).
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000
# npm forwards SIGTERM to node, which drains (SHUTDOWN_TIMEOUT_MS) before exiting.
CMD ["npm", "run", "start:api"]

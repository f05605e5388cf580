# One image for every Oncehook process; the compose file picks the command.
# TypeScript runs through tsx (no build step): the source is what runs.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
COPY packages/shared/package.json packages/shared/
COPY packages/sdk/package.json packages/sdk/
COPY packages/testkit/package.json packages/testkit/
COPY packages/harness/package.json packages/harness/
COPY examples/shop/package.json examples/shop/
COPY apps/ingest/package.json apps/ingest/
COPY apps/worker/package.json apps/worker/
COPY apps/sandbox/package.json apps/sandbox/
COPY test/package.json test/
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY packages packages
COPY apps apps
COPY examples examples
USER node
CMD ["node", "--import", "tsx", "apps/ingest/src/server.ts"]

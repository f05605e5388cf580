# One image for every Oncehook process; the compose file picks the command.
#
# Build stage: every dependency, then `npm run build`, which type-checks the whole repository
# with tsc (a type error fails the image build) and emits each package's JavaScript into its
# dist/ (scripts/build.ts).
FROM node:20-bookworm-slim AS build
WORKDIR /app
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
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

# Runtime: production dependencies and the emitted JavaScript; no TypeScript runs here, except
# handler modules of yours written in TypeScript (loaded through tsx on demand). Every node
# process resolves @oncehook/* to its dist/ (the oncehook-dist export condition).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production \
    NODE_OPTIONS=--conditions=oncehook-dist
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/packages/shared/package.json packages/shared/
COPY --from=build /app/packages/sdk/package.json packages/sdk/
COPY --from=build /app/packages/testkit/package.json packages/testkit/
COPY --from=build /app/packages/harness/package.json packages/harness/
COPY --from=build /app/examples/shop/package.json examples/shop/
COPY --from=build /app/apps/ingest/package.json apps/ingest/
COPY --from=build /app/apps/worker/package.json apps/worker/
COPY --from=build /app/apps/sandbox/package.json apps/sandbox/
COPY --from=build /app/test/package.json test/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/packages/shared/dist packages/shared/dist
COPY --from=build /app/packages/sdk/dist packages/sdk/dist
COPY --from=build /app/apps/ingest/dist apps/ingest/dist
COPY --from=build /app/apps/worker/dist apps/worker/dist
COPY --from=build /app/apps/sandbox/dist apps/sandbox/dist
COPY --from=build /app/examples/shop/dist examples/shop/dist
COPY --from=build /app/examples/shop/migrations examples/shop/migrations
USER node
EXPOSE 3000
CMD ["node", "apps/ingest/dist/server.js"]

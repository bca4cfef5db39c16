# syntax=docker/dockerfile:1
# workbench as a container image: a build stage that runs the same setup and release build as
# README command 1, and a small Debian runtime with the binary, the portal's assets and the
# tool-search model. Runs as a non-root user, writes only to /data (SQLite by default, a volume)
# and /tmp, so a read-only root filesystem works. PostgreSQL: set WB_DATABASE_URL.
# Build: docker build -t workbench .   Run: docker run -p 3000:3000 -v wb-data:/data workbench
# docs/deploy.md has the details.

ARG RUST_VERSION=1.95
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS node

FROM rust:${RUST_VERSION}-bookworm AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Node and npm for the CSS build (Tailwind) and the JS minifier (terser); python3's pip to fetch the search model.
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && apt-get update \
    && apt-get install -y --no-install-recommends python3-pip \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The build tools (wasm target, wasm-bindgen-cli, npm packages, the model) depend
# only on these files, so this layer survives source changes.
COPY scripts/setup.sh scripts/setup.sh
COPY Cargo.lock package.json package-lock.json ./
RUN scripts/setup.sh
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=locked \
    scripts/build-release.sh \
    && mkdir -p /out \
    && cp target/release/workbench /out/workbench \
    && cp -r target/site /out/site

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 workbench \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin workbench \
    && mkdir -p /data \
    && chown 10001:10001 /data \
    && chmod 0700 /data
COPY --from=build /out/workbench /usr/local/bin/workbench
COPY --from=build /out/site /opt/workbench/site
COPY --from=build /src/models/wordllama /opt/workbench/models/wordllama
ENV WB_BIND=0.0.0.0:3000 \
    WB_DATA_DIR=/data \
    WB_DATABASE_URL=sqlite:///data/workbench.db \
    WB_SITE_ROOT=/opt/workbench/site \
    WB_SEARCH_MODEL_DIR=/opt/workbench/models/wordllama \
    WB_LOG_FORMAT=json
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 3000
# SIGTERM drains requests (10 s) and writes queued records (10 s): give it 30 s (docker stop -t 30).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=6s --start-period=30s --retries=3 CMD ["workbench", "health"]
ENTRYPOINT ["workbench"]
CMD ["serve"]

# syntax=docker/dockerfile:1
# Shardline images, built from the workspace in two stages (Rust toolchain, then Debian slim):
#   docker build --target admin -t shardline-admin .
#   docker build --target demo-executor -t shardline-demo-executor .
# docker-compose.yml builds both.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# The cache mounts keep the registry and build artefacts between builds; the binaries are copied
# out in the same step because a cache mount is not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p shardline-admin --bin shardline-admin \
 && cargo build --release --locked -p shardline-executor --example demo_executor \
 && mkdir -p /out \
 && cp target/release/shardline-admin target/release/examples/demo_executor /out/

# Same Debian release as the build image, so the glibc the binaries link against is there.
FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /var/lib/shardline shardline
WORKDIR /var/lib/shardline
USER shardline

FROM runtime AS demo-executor
COPY --from=build /out/demo_executor /usr/local/bin/shardline-demo-executor
ENV SHARDLINE_EXECUTOR_BIND=0.0.0.0:9999 \
    SHARDLINE_EXECUTOR_LOG_PATH=/var/lib/shardline/logs
EXPOSE 9999
ENTRYPOINT ["shardline-demo-executor"]

# Last stage, so a plain `docker build .` gives the admin.
FROM runtime AS admin
COPY --from=build /out/shardline-admin /usr/local/bin/shardline-admin
# Without SHARDLINE_DATABASE_URL the admin keeps SQLite in /var/lib/shardline/data.
ENV SHARDLINE_BIND=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["shardline-admin"]
CMD ["serve"]

# syntax=docker/dockerfile:1
#
# The runtime-cloud image: one binary for every role (`api`, `worker`, `migrate`, `token`,
# `sandbox`); the role is the command. Built and run by docker-compose.yml; see docs/deploy.md.
#
#   docker build -t runtime-cloud .
#   docker run --rm runtime-cloud --help

# --- build: the release binary ---------------------------------------------------------------
FROM rust:1-bookworm AS builder

# protoc compiles the Temporal protos and proto/runtimecloud (api/build.rs).
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

# The registry and target dir are cache mounts, so the binary is copied out of the target dir
# in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin runtime-cloud \
 && install -D -m 0755 target/release/runtime-cloud /out/runtime-cloud

# --- run: Debian slim (same glibc as the builder), CA roots, a non-root user -----------------
FROM debian:bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 runtime-cloud \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/runtime-cloud \
      --shell /usr/sbin/nologin runtime-cloud \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/runtime-cloud

COPY --from=builder /out/runtime-cloud /usr/local/bin/runtime-cloud

# The data dir holds the sandbox targets (and the JWT key when RUNTIME_CLOUD_JWT_SECRET is
# unset); a volume mounted here starts out owned by the runtime user.
ENV RUNTIME_CLOUD_DATA_DIR=/var/lib/runtime-cloud \
    RUNTIME_CLOUD_LISTEN=0.0.0.0:8080
WORKDIR /var/lib/runtime-cloud
USER 10001:10001
EXPOSE 8080

# Probes: GET /healthz (liveness) and GET /readyz (read DB and Temporal) on port 8080.
ENTRYPOINT ["runtime-cloud"]
CMD ["api"]

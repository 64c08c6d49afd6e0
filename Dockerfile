# One image for every droidmesh service: each Kubernetes Deployment runs
# `droidmesh serve <service>` from it (see k8s/). The device pod also runs Debian's adb server
# from it as a sidecar, so the runtime stage carries `adb`.
#
# The build stage runs the release form of the build CI runs (scripts/test.sh builds
# `cargo build -p droidmesh --locked`); scripts/check-k8s.sh checks the two agree, that the
# release profile strips the binary, that the toolchain is at least the workspace's
# rust-version and that the image runs as a numeric non-root user (the manifests' runAsUser).

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
# [profile.release] in Cargo.toml strips the binary (no debug info, no symbol table): about
# 33 MB; scripts/release-size.sh checks it stays under 40 MB.
RUN cargo build --release -p droidmesh --locked \
    && install -D -m 0755 target/release/droidmesh /out/droidmesh

FROM debian:bookworm-slim
# adb: the adb server sidecar of the device pod. ca-certificates: TLS to LLM providers.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends adb ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 10001 droidmesh \
    && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/droidmesh droidmesh
COPY --from=build /out/droidmesh /usr/local/bin/droidmesh
USER 10001:10001
ENV HOME=/home/droidmesh
WORKDIR /home/droidmesh
# gRPC ports of the six services ([listen] in droidmesh.toml) and the admin/metrics port.
EXPOSE 50050 50051 50052 50053 50054 50055 9464
ENTRYPOINT ["droidmesh"]
CMD ["--help"]

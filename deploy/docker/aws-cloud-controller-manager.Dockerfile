# syntax=docker/dockerfile:1
# The aws-cloud-controller-manager image: a drop-in for registry.k8s.io/provider-aws/cloud-controller-manager.
# The binary sits where the Go image has it (/bin/aws-cloud-controller-manager) and is the entrypoint, so manifests
# that pass only `args` keep working. Build from the repository root (see docs/getting-started.md):
#
#   docker build -f deploy/docker/aws-cloud-controller-manager.Dockerfile -t <registry>/aws-cloud-controller-manager:<tag> .
#
# Multi-arch: `docker buildx build --platform linux/amd64,linux/arm64 ...` (each platform compiles natively, under
# emulation where needed; no cross toolchain involved).

# The toolchain pinned by rust-toolchain.toml, so rustup needs nothing from the network.
FROM docker.io/library/rust:1.95.0-bookworm AS build
# aws-lc-rs (TLS for the AWS SDK and kube) builds its C code with cc; cmake and clang cover the targets where
# aws-lc-sys falls back to them.
RUN apt-get update && apt-get install -y --no-install-recommends cmake clang && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ccm-examples --bin aws-cloud-controller-manager \
    && install -D -m 0755 target/release/aws-cloud-controller-manager /out/aws-cloud-controller-manager

# glibc, libgcc and CA certificates only; no shell, no package manager. User 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/aws-cloud-controller-manager /bin/aws-cloud-controller-manager
USER 65532:65532
ENTRYPOINT ["/bin/aws-cloud-controller-manager"]

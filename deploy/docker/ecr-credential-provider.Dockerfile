# syntax=docker/dockerfile:1
# The kubelet image credential provider for ECR, as a static binary. The kubelet runs it from the host
# (`--image-credential-provider-bin-dir`), not in a container, so this build produces a file, not a service image:
#
#   docker build -f deploy/docker/ecr-credential-provider.Dockerfile --output type=local,dest=out .
#   # -> out/bin/ecr-credential-provider (statically linked with musl: runs on any Linux node of that arch)
#
# `docker build ... -t <registry>/ecr-credential-provider:<tag> .` gives an image holding only
# /bin/ecr-credential-provider, for node bootstrap tooling that copies it out (see docs/credential-provider.md).

# The toolchain pinned by rust-toolchain.toml, so rustup needs nothing more than the musl target.
FROM docker.io/library/rust:1.95.0-bookworm AS build
# musl-tools: the C compiler wrapper aws-lc-rs (the TLS crypto of the AWS SDK) needs for a static build.
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools cmake clang \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    target="$(uname -m)-unknown-linux-musl" \
    && rustup target add "$target" \
    && cargo build --release --locked --target "$target" -p ccm-examples --bin ecr-credential-provider \
    && install -D -m 0755 "target/$target/release/ecr-credential-provider" /out/bin/ecr-credential-provider

FROM scratch
COPY --from=build /out/bin/ecr-credential-provider /bin/ecr-credential-provider
USER 65532:65532
ENTRYPOINT ["/bin/ecr-credential-provider"]

# syntax=docker/dockerfile:1
# The kubelet image credential provider for ECR, as a static binary. The kubelet runs it from the host
# (`--image-credential-provider-bin-dir`), not in a container, so this build produces a file as well as an image:
#
#   docker build -f deploy/docker/ecr-credential-provider.Dockerfile --target bin --output type=local,dest=out .
#   # -> out/bin/ecr-credential-provider (statically linked: runs on any Linux node of that architecture)
#   docker buildx build --platform linux/amd64,linux/arm64 -f deploy/docker/ecr-credential-provider.Dockerfile \
#     -t <registry>/ecr-credential-provider:<tag> --push .
#
# The image holds only /bin/ecr-credential-provider (and CA certificates), for node bootstrap tooling that copies it
# out (see docs/credential-provider.md); run, it answers a CredentialProviderRequest on stdin.
# As the controller manager's Dockerfile, the build stage runs on $BUILDPLATFORM and cross-compiles.
# Profile `release-small` (workspace Cargo.toml): fat LTO, size-optimised, panic=abort, since the kubelet starts
# the binary once per request; see docs/credential-provider.md for its size and start-up figures.
# scripts/images.sh builds the same image without Docker (buildah) and runs it (runc); see docs/testing.md.

FROM --platform=$BUILDPLATFORM docker.io/library/rust:1.95.0-bookworm AS build
ARG TARGETARCH
# cmake and clang: aws-lc-sys (TLS crypto of the AWS SDK and kube). The cross compiler and C library of the target
# architecture are installed below, only when it differs from the build machine's.
RUN apt-get update && apt-get install -y --no-install-recommends cmake clang && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    case "$TARGETARCH" in \
      amd64) arch=x86_64 deb=amd64 ;; \
      arm64) arch=aarch64 deb=arm64 ;; \
      *) echo "unsupported TARGETARCH=$TARGETARCH (accepted: amd64, arm64)" >&2; exit 1 ;; \
    esac \
    && if [ "$(uname -m)" != "$arch" ]; then \
         apt-get update && apt-get install -y --no-install-recommends \
           "gcc-$(echo "$arch" | tr _ -)-linux-gnu" "libc6-dev-$deb-cross"; \
       fi \
    && target="$arch-unknown-linux-gnu" && env_target="$(echo "$target" | tr 'a-z-' 'A-Z_')" \
    && rustup target add "$target" \
    && export "CARGO_TARGET_${env_target}_LINKER=$arch-linux-gnu-gcc" "CC_$(echo "$target" | tr '-' '_')=$arch-linux-gnu-gcc" \
    && RUSTFLAGS="-C target-feature=+crt-static" \
       cargo build --profile release-small --locked --target "$target" -p ccm-examples --bin ecr-credential-provider \
    && install -D -m 0755 "target/$target/release-small/ecr-credential-provider" /out/bin/ecr-credential-provider \
    && install -D -m 0644 /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

# `--target bin --output type=local,dest=out`: the binary alone, for the nodes.
FROM scratch AS bin
COPY --from=build /out/bin/ecr-credential-provider /bin/ecr-credential-provider

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
ENTRYPOINT ["/bin/ecr-credential-provider"]

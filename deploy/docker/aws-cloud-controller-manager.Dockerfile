# syntax=docker/dockerfile:1
# The aws-cloud-controller-manager image: a drop-in for registry.k8s.io/provider-aws/cloud-controller-manager.
# The binary sits where the Go image has it (/bin/aws-cloud-controller-manager) and is the entrypoint, so manifests
# that pass only `args` keep working. The operator's tools of the same build sit beside it: /bin/lb-plan (the
# load-balancer dry run) and /bin/doctor (the leak report). Build from the repository root (see
# docs/getting-started.md):
#
#   docker build -f deploy/docker/aws-cloud-controller-manager.Dockerfile -t <registry>/aws-cloud-controller-manager:<tag> .
#   docker build -f deploy/docker/aws-cloud-controller-manager.Dockerfile --target tools --output type=local,dest=out .
#   docker buildx build --platform linux/amd64,linux/arm64 -f deploy/docker/aws-cloud-controller-manager.Dockerfile \
#     -t <registry>/aws-cloud-controller-manager:<tag> --push .
#
# The build stage runs on the build machine's platform ($BUILDPLATFORM) and cross-compiles for each target
# platform, so an arm64 image takes a cross linker, not hours under QEMU emulation. The binary is linked
# statically (glibc's crt-static), so the image is FROM scratch: the binaries, CA certificates, nothing else.
# scripts/images.sh builds the same image without Docker (buildah) and runs it (runc); see docs/testing.md.

# The toolchain pinned by rust-toolchain.toml.
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
       cargo build --release --locked --target "$target" -p ccm-examples \
         --bin aws-cloud-controller-manager --bin lb-plan --bin doctor \
    && for bin in aws-cloud-controller-manager lb-plan doctor; do \
         install -D -m 0755 "target/$target/release/$bin" "/out/bin/$bin"; \
       done \
    && install -D -m 0755 "target/$target/release/lb-plan" /tools/bin/kubectl-lb_plan \
    && install -D -m 0755 "target/$target/release/doctor" /tools/bin/kubectl-ccm_doctor \
    && install -D -m 0644 /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

# `--target tools --output type=local,dest=out`: lb-plan and doctor named as kubectl plugins (kubectl lb-plan,
# kubectl ccm-doctor), written to ./out/bin/ for an operator's Linux machine (docs/lb-plan.md, docs/doctor.md).
FROM scratch AS tools
COPY --from=build /tools/ /

# No shell, no package manager, no libraries. User 65532 ("nonroot", as distroless).
FROM scratch
COPY --from=build /out/ /
USER 65532:65532
# glibc's malloc as the 5,000-Node scale run measured it (docs/performance.md): one arena rather than one per
# thread, and blocks of 128 KiB and more (bulk listings' responses) mapped and given back when freed rather than
# kept in the heap. At 5,000 Nodes and 500 Services the peak fell from 111 to 100 MiB. Set the same two variables
# when running the binary outside this image.
ENV MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=131072
ENTRYPOINT ["/bin/aws-cloud-controller-manager"]

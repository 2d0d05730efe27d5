# syntax=docker/dockerfile:1

# walapply as a small container image: a static binary (no cgo) on a
# distroless base, running as a non-root user.
#
#   docker build -t walapply .
#   docker run --rm -e WALAPPLY_SOURCE=... -e WALAPPLY_TARGET=... \
#     -e WALAPPLY_SLOT=app -e WALAPPLY_PUBLICATION=app -p 9850:9850 walapply
#
# The entry point is the walapply command; the default arguments are `run`,
# configured through WALAPPLY_* environment variables (every flag has one:
# --spill-dir is WALAPPLY_SPILL_DIR). Other commands: `docker run walapply
# status --target ...`. See docs/KUBERNETES.md for a sidecar.

ARG GO_VERSION=1.26

# Build on the build machine's platform and cross-compile for the target
# one: pure Go, so no emulation is needed for other architectures.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/walapply ./cmd/walapply
# The spill directory must exist in the image, owned by the runtime user:
# a volume mounted there starts as a copy of it (ownership included), and
# distroless has no shell to create it later.
RUN mkdir -p /out/state/spill

# distroless/static: CA certificates (for sslmode=verify-full) and time
# zone data, no shell, no package manager. The :nonroot tag's user is
# 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/walapply /usr/local/bin/walapply
COPY --from=build --chown=65532:65532 /out/state /var/lib/walapply
USER 65532:65532
# Streamed transactions are spilled here until they commit: scratch space,
# removed at start, but it must hold the largest transaction in flight.
ENV WALAPPLY_SPILL_DIR=/var/lib/walapply/spill \
    WALAPPLY_METRICS_ADDR=:9850 \
    WALAPPLY_LOG_FORMAT=json
VOLUME ["/var/lib/walapply/spill"]
# Prometheus /metrics and the /healthz and /readyz probes.
EXPOSE 9850
ENTRYPOINT ["/usr/local/bin/walapply"]
CMD ["run"]

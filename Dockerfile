# hone: the hone binary (with NVML through cgo), the shipped prepared tiny
# model for the embedded engine, non-root, data and checkpoints on volumes.
# (`make build-static` gives a fully static binary without NVML instead.)
#
#   docker build -t hone .
#   docker run -p 8080:8080 -e HONE_PROXY_CLIENT_KEYS=sk-agent1,sk-agent2 hone   # embedded CPU engine + tiny model
#   docker run -p 8080:8080 -p 8081:8081 -e HONE_PROXY_CLIENT_KEYS=sk-agent1 \
#     -e HONE_PROXY_CONTROL_LISTEN=0.0.0.0:8081 -e HONE_PROXY_CONTROL_TOKEN=change-me \
#     hone serve --engine http://vllm:8000 --train       # in front of vLLM (see deploy/)
#
# The data plane listens on every interface here, so hone needs to tell the
# agents apart: each agent sends one of HONE_PROXY_CLIENT_KEYS as its API key
# and owns the sessions it opens. Without keys hone refuses to start, unless
# HONE_PROXY_AGENTS_TRUST_EACH_OTHER=1 says every agent that can reach it may
# act on the others' sessions (docs/security.md).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# cgo on: go-nvml loads the driver's libnvidia-ml at run time (the NVIDIA
# container toolkit mounts it on GPU nodes), so the runtime image has glibc.
# No GOAMD64 level: kernels/cpu picks its AVX2+FMA assembly or plain Go at run time, so one image runs on any x86-64.
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hone ./cmd/hone

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends wget && rm -rf /var/lib/apt/lists/* \
    && groupadd -g 10001 hone && useradd -u 10001 -g hone -d /app -m hone \
    && mkdir -p /data /checkpoints && chown hone:hone /data /checkpoints
WORKDIR /app
COPY --from=build /out/hone /usr/local/bin/hone
# hone serve uses testdata/tiny-model (relative to the working folder) when
# no --model or --engine is given.
COPY --chown=hone:hone testdata/tiny-model /app/testdata/tiny-model
# The data plane listens on every interface here (hone's own default is
# 127.0.0.1:8080, the sidecar case). To change it pass --listen or set
# HONE_PROXY_LISTEN: the variable wins over a config file's proxy.listen.
ENV HONE_DATA=/data \
    HONE_TRAINER_CHECKPOINT_DIR=/checkpoints \
    HONE_PROXY_LISTEN=0.0.0.0:8080
VOLUME ["/data", "/checkpoints"]
# 8080: data plane (OpenAI API for agents). 8081: control plane (feedback,
# experiences, admin, metrics, /healthz); it listens on loopback unless
# HONE_PROXY_CONTROL_LISTEN is set, which then needs HONE_PROXY_CONTROL_TOKEN.
EXPOSE 8080 8081
USER hone
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD wget -q -O /dev/null http://127.0.0.1:8081/healthz || exit 1
ENTRYPOINT ["hone"]
CMD ["serve"]

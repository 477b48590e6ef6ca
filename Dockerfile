# The shipnotify binary in a small image: `docker compose up` builds it.
# Base images are pinned, never a moving tag: the Go toolchain to the exact
# version go.mod names (a test keeps them equal), distroless by digest
# (static-debian12:nonroot as of 2026-08-26; to update:
# `crane digest gcr.io/distroless/static-debian12:nonroot`).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/shipnotify ./cmd/shipnotify

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/shipnotify /usr/local/bin/shipnotify
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/shipnotify"]
CMD ["worker"]

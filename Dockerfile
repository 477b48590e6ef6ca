# The shipnotify binary in a small image: `docker compose up` builds it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/shipnotify ./cmd/shipnotify

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shipnotify /usr/local/bin/shipnotify
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/shipnotify"]
CMD ["worker"]

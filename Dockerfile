# syntax=docker/dockerfile:1
# The loader as a container image: one static binary on distroless, running as non-root.
#   docker build -t loader .
#   docker run --rm loader load --help
# The embedded sink, as a shared local target with its warehouse on a volume:
#   docker run -v loader-warehouse:/warehouse -p 8815:8815 -p 9090:9090 loader \
#     serve --warehouse /warehouse --listen 0.0.0.0:8815 --metrics-addr 0.0.0.0:9090

FROM golang:1.26 AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/loader ./cmd/loader

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/loader /loader
USER nonroot:nonroot
# The embedded sink's warehouse, when the image runs `loader serve`.
VOLUME ["/warehouse"]
EXPOSE 8815 9090
ENTRYPOINT ["/loader"]
CMD ["--help"]

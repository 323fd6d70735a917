# roformer-serve: text-embeddings-inference's API for RoFormer checkpoints, CPU build.
#   docker build -t roformer-serve .
#   docker run -p 8080:8080 -v $PWD/models:/models roformer-serve --model /models/roformer-sst2
# (The runtime image carries no model: mount a folder, or give a Hub id and let it download.)
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p roformer-serve

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home --home-dir /home/serve serve
COPY --from=build /src/target/release/roformer-serve /usr/local/bin/roformer-serve
USER serve
ENV HF_HOME=/home/serve/.cache/huggingface
EXPOSE 8080
ENTRYPOINT ["roformer-serve", "--host", "0.0.0.0", "--port", "8080"]

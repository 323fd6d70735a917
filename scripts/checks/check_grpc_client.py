# A Python gRPC client generated from TEI's proto against a running roformer-serve. Run: .venv/bin/python scripts/checks/check_grpc_client.py --address 127.0.0.1:8080
"""Checks roformer-serve's gRPC API (feature `grpc`) with the client grpcio-tools generates from
serve/proto/tei.proto (TEI's own), against the same requests over HTTP.

Start a server built with the feature first, then:

    cargo run --release -p roformer-serve --features grpc -- --model models/roformer-sst2 --port 8080 &
    .venv/bin/python scripts/checks/check_grpc_client.py --address 127.0.0.1:8080

It calls Info, and every method the loaded model serves (Embed, EmbedAll and Tokenize, Decode on
any model; Predict, PredictPair on a classifier; Rerank on a cross-encoder; EmbedSparse on a
SPLADE model), each in its unary and its streaming form, compares each answer with the server's
HTTP answer (within 1e-5), prints the versions it used, and exits 1 on any mismatch.
Needs `pip install grpcio grpcio-tools` (not in scripts/requirements.txt: only this script uses it).
"""

import argparse
import importlib
import json
import pathlib
import sys
import tempfile
import urllib.request

import grpc
from grpc_tools import protoc

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXTS = ["a gorgeous , witty , seductive movie .", "the plot is nothing but boilerplate clichés ."]


def generated():
    """tei_pb2 and tei_pb2_grpc, generated from serve/proto/tei.proto into a temporary folder."""
    out = tempfile.mkdtemp(prefix="tei-grpc-")
    proto = ROOT / "serve" / "proto"
    code = protoc.main(["protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_python_out={out}", str(proto / "tei.proto")])
    if code != 0:
        sys.exit(f"grpcio-tools could not compile {proto / 'tei.proto'}")
    sys.path.insert(0, out)
    return importlib.import_module("tei_pb2"), importlib.import_module("tei_pb2_grpc")


def post(address, path, body):
    request = urllib.request.Request(f"http://{address}{path}", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:8080", help="host:port of the server")
    args = parser.parse_args()
    pb, stubs = generated()
    channel = grpc.insecure_channel(args.address)
    failures = []

    def close(what, got, want):
        got, want = list(got), list(want)
        if len(got) != len(want) or any(abs(g - w) > 1e-5 for g, w in zip(got, want)):
            failures.append(what)
        print(("ok  " if not failures or failures[-1] != what else "FAIL") + f" {what}")

    info = stubs.InfoStub(channel).Info(pb.InfoRequest())
    kind = pb.ModelType.Name(info.model_type)
    print(f"Info: {info.model_id}, {kind}, max_input_length {info.max_input_length}")
    with urllib.request.urlopen(f"http://{args.address}/info") as response:
        http_info = json.load(response)
    splade = http_info["model_type"].get("embedding", {}).get("pooling") == "splade"

    embed = stubs.EmbedStub(channel)
    if splade:
        for text in TEXTS:
            got = embed.EmbedSparse(pb.EmbedSparseRequest(inputs=text))
            want = post(args.address, "/embed_sparse", {"inputs": text})[0]
            close(f"EmbedSparse {text!r} indices", [v.index for v in got.sparse_embeddings], [v["index"] for v in want])
            close(f"EmbedSparse {text!r} values", [v.value for v in got.sparse_embeddings], [v["value"] for v in want])
        streamed = list(embed.EmbedSparseStream(iter([pb.EmbedSparseRequest(inputs=t) for t in TEXTS])))
        close("EmbedSparseStream", [len(r.sparse_embeddings) for r in streamed], [len(post(args.address, "/embed_sparse", {"inputs": t})[0]) for t in TEXTS])
    else:
        for text in TEXTS:
            want = post(args.address, "/embed", {"inputs": text})[0]
            close(f"Embed {text!r}", embed.Embed(pb.EmbedRequest(inputs=text)).embeddings, want)
            got = embed.EmbedAll(pb.EmbedAllRequest(inputs=text))
            want = post(args.address, "/embed_all", {"inputs": text})[0]
            close(f"EmbedAll {text!r}", [x for t in got.token_embeddings for x in t.embeddings], [x for t in want for x in t])
        streamed = list(embed.EmbedStream(iter([pb.EmbedRequest(inputs=t) for t in TEXTS])))
        for text, answer in zip(TEXTS, streamed):
            close(f"EmbedStream {text!r}", answer.embeddings, post(args.address, "/embed", {"inputs": text})[0])
        streamed = list(embed.EmbedAllStream(iter([pb.EmbedAllRequest(inputs=t) for t in TEXTS])))
        close("EmbedAllStream", [len(r.token_embeddings) for r in streamed], [len(post(args.address, "/embed_all", {"inputs": t})[0]) for t in TEXTS])

    if kind == "MODEL_TYPE_CLASSIFIER" or kind == "MODEL_TYPE_RERANKER":
        predict = stubs.PredictStub(channel)
        for text in TEXTS:
            got = predict.Predict(pb.PredictRequest(inputs=text, raw_scores=True))
            want = post(args.address, "/predict", {"inputs": text, "raw_scores": True})
            close(f"Predict {text!r}", [p.score for p in got.predictions], [p["score"] for p in want])
        got = predict.PredictPair(pb.PredictPairRequest(inputs=TEXTS))
        close("PredictPair", [p.score for p in got.predictions], [p["score"] for p in post(args.address, "/predict", {"inputs": TEXTS})])
        streamed = list(predict.PredictStream(iter([pb.PredictRequest(inputs=t) for t in TEXTS])))
        close("PredictStream", [r.predictions[0].score for r in streamed], [post(args.address, "/predict", {"inputs": t})[0]["score"] for t in TEXTS])
        streamed = list(predict.PredictPairStream(iter([pb.PredictPairRequest(inputs=TEXTS)])))
        close("PredictPairStream", [streamed[0].predictions[0].score], [post(args.address, "/predict", {"inputs": TEXTS})[0]["score"]])
    if kind == "MODEL_TYPE_RERANKER":
        rerank = stubs.RerankStub(channel)
        got = rerank.Rerank(pb.RerankRequest(query="a good movie", texts=TEXTS))
        want = post(args.address, "/rerank", {"query": "a good movie", "texts": TEXTS})
        close("Rerank", [r.score for r in got.ranks], [r["score"] for r in want])
        got = rerank.RerankStream(iter([pb.RerankStreamRequest(query="a good movie", text=t) for t in TEXTS]))
        close("RerankStream", [r.score for r in got.ranks], [r["score"] for r in want])

    tokenize = stubs.TokenizeStub(channel)
    got = tokenize.Tokenize(pb.EncodeRequest(inputs=TEXTS[0], add_special_tokens=True))
    want = post(args.address, "/tokenize", {"inputs": TEXTS[0]})[0]
    close("Tokenize", [t.id for t in got.tokens], [t["id"] for t in want])
    streamed = list(tokenize.TokenizeStream(iter([pb.EncodeRequest(inputs=t, add_special_tokens=True) for t in TEXTS])))
    close("TokenizeStream", [len(r.tokens) for r in streamed], [len(post(args.address, "/tokenize", {"inputs": t})[0]) for t in TEXTS])
    ids = [t.id for t in got.tokens]
    text = tokenize.Decode(pb.DecodeRequest(ids=ids, skip_special_tokens=True)).text
    if [text] != post(args.address, "/decode", {"ids": ids, "skip_special_tokens": True}):
        failures.append("Decode")
    print(("FAIL" if "Decode" in failures else "ok  ") + " Decode")
    streamed = list(tokenize.DecodeStream(iter([pb.DecodeRequest(ids=ids, skip_special_tokens=True)])))
    if streamed[0].text != text:
        failures.append("DecodeStream")
    print(("FAIL" if "DecodeStream" in failures else "ok  ") + " DecodeStream")

    print(f"grpcio {grpc.__version__}, python {sys.version.split()[0]}")
    if failures:
        sys.exit(f"{len(failures)} mismatches: {failures}")
    print("all gRPC answers match HTTP")


if __name__ == "__main__":
    main()

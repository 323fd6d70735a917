# huggingface_hub's and openai's clients against a running roformer-serve. Run: python scripts/checks/check_serve_clients.py --url http://127.0.0.1:8080
"""Checks the serve example against the Python clients people point at TEI.

Start a server first, then:

    cargo run --release --example serve -- --model models/roformer-sst2 --port 8080 &
    python scripts/checks/check_serve_clients.py --url http://127.0.0.1:8080

It runs huggingface_hub's InferenceClient (feature_extraction, and text_classification when the
model is a classifier) and the openai client (embeddings.create, whose default asks for base64),
compares what they return with the server's own /embed and /predict answers, prints the versions
it tried, and exits 1 on any mismatch.
"""

import argparse
import json
import platform
import sys
import urllib.request

import huggingface_hub
import numpy as np
import openai
from huggingface_hub import InferenceClient

SENTENCES = ["a gorgeous , witty , seductive movie .", "the plot is nothing but boilerplate clichés ."]


def post(url, path, body):
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    args = parser.parse_args()
    url = args.url.rstrip("/")

    print(f"python {platform.python_version()}, huggingface_hub {huggingface_hub.__version__}, openai {openai.__version__}")
    with urllib.request.urlopen(url + "/info") as response:
        info = json.loads(response.read())
    print(f"server: {info['model_id']}, {list(info['model_type'])[0]}, version {info['version']}")
    failures = []

    def check(name, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
        if not ok:
            failures.append(name)

    want = np.array(post(url, "/embed", {"inputs": SENTENCES}), dtype=np.float32)

    # InferenceClient posts to the URL itself (TEI's POST /), parameters at the root.
    client = InferenceClient(url)
    if "embedding" in info["model_type"]:
        got = client.feature_extraction(SENTENCES[0])
        check("InferenceClient.feature_extraction(str)", got.shape == (1, want.shape[1]) and np.allclose(got[0], want[0], atol=1e-6), f"shape {got.shape}")
        got = client.feature_extraction(SENTENCES)
        check("InferenceClient.feature_extraction(list)", got.shape == want.shape and np.allclose(got, want, atol=1e-6), f"shape {got.shape}")
    else:
        # On a classifier POST / is /predict, as in TEI; feature_extraction gets labels back.
        print("skip InferenceClient.feature_extraction: POST / on a classifier is /predict, as in TEI")
    if "classifier" in info["model_type"]:
        want_labels = post(url, "/predict", {"inputs": SENTENCES[0]})
        got = client.text_classification(SENTENCES[0])
        # TEI answers a flat list for one text, and the client keeps its first element: with
        # huggingface_hub versions that index the answer, that is the top label alone.
        got_list = got if isinstance(got, list) else [got]
        top = got_list[0]
        check(
            "InferenceClient.text_classification(str)",
            top.label == want_labels[0]["label"] and abs(top.score - want_labels[0]["score"]) < 1e-6,
            f"-> {[(g.label, round(g.score, 4)) for g in got_list]}",
        )

    if "reranker" in info["model_type"]:
        # No client has a rerank call for TEI; requests' shape is TEI's. Raw scores are the pairs'
        # logits of /predict (query first), best first.
        query, texts = SENTENCES[0], SENTENCES[1:] + ["a chore .", "the cat sat on the mat", SENTENCES[0]]
        ranks = post(url, "/rerank", {"query": query, "texts": texts, "raw_scores": True, "return_text": True})
        logits = [p[0]["score"] for p in post(url, "/predict", {"inputs": [[query, t] for t in texts], "raw_scores": True})]
        order = sorted(range(len(texts)), key=lambda i: -logits[i])
        check(
            "POST /rerank",
            [r["index"] for r in ranks] == order
            and all(abs(r["score"] - logits[r["index"]]) < 1e-5 and r["text"] == texts[r["index"]] for r in ranks),
            f"-> {[(r['index'], round(r['score'], 4)) for r in ranks]}",
        )

    oai = openai.OpenAI(base_url=url + "/v1", api_key="unused")
    response = oai.embeddings.create(model=info["served_model_name"], input=SENTENCES)
    got = np.array([d.embedding for d in response.data], dtype=np.float32)
    check("openai embeddings.create (base64 by default)", got.shape == want.shape and np.allclose(got, want, atol=1e-6), f"shape {got.shape}, usage {response.usage.prompt_tokens} tokens")
    response = oai.embeddings.create(model=info["served_model_name"], input=SENTENCES[1], encoding_format="float")
    got = np.array(response.data[0].embedding, dtype=np.float32)
    check("openai embeddings.create(encoding_format='float')", np.allclose(got, want[1], atol=1e-6), f"dim {got.shape[0]}")

    if failures:
        print(f"{len(failures)} failed: {failures}")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()

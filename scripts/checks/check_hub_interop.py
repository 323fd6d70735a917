#!/usr/bin/env python3
# The crate's Hub cache against Python's huggingface_hub, both ways, on a fake Hub. Run: .venv/bin/python scripts/checks/check_hub_interop.py [--no-build]
"""The crate's Hub cache and Python's huggingface_hub, both ways, against a local fake Hub.

    .venv/bin/python scripts/checks/check_hub_interop.py            # builds the classify and embed examples
    .venv/bin/python scripts/checks/check_hub_interop.py --no-build # uses target/release/examples as built

A fake Hub on 127.0.0.1 answers as huggingface.co does (HEAD/GET /{repo}/resolve/{revision}/{file},
X-Repo-Commit, ETag as a git blob hash, X-Error-Code, and a 302 with X-Linked-Etag/X-Linked-Size to a
second server, the "CDN", for *.safetensors and *.bin). It serves five repos from the test fixtures:
a classifier on main and another on refs/pr/1, sharded safetensors, a .bin-only repo and sharded .bin.

1. The crate downloads them into one cache; huggingface_hub reads every file from it offline
   (`local_files_only`), finds each a link into blobs/ under the etag the server sent, sees the
   refs and the revisions in `scan_cache_dir`, and the missing files in `.no_exist`. A second
   run of the crate makes no request.
2. huggingface_hub downloads the same files into another cache; the servers stop, and the crate
   loads every repo from it offline, with the same outputs as in 1.

Needs huggingface_hub and torch (scripts/requirements.txt); CI does not run this (it needs Python).
"""

import argparse
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SENTENCES = ["a great film", "the movie was terrible and boring", "! # $"]


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_large(name: str) -> bool:
    return name.endswith(".safetensors") or name.endswith(".bin")


class FakeHub:
    """(repo, revision) -> folder; a commit is the sha1 of the folder's path."""

    def __init__(self, repos):
        self.repos = repos
        self.requests = 0
        self.lock = threading.Lock()
        self.hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler(cdn=False))
        self.cdn = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler(cdn=True))
        for server in (self.hub, self.cdn):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.hub.server_address[1]}"

    def stop(self):
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    @staticmethod
    def commit(folder: Path) -> str:
        return hashlib.sha1(str(folder).encode()).hexdigest()

    def find(self, repo, revision):
        for (r, rev), folder in self.repos.items():
            if r == repo and (rev == revision or self.commit(folder) == revision):
                return folder
        return None

    def etag(self, name, data):
        return hashlib.sha256(data).hexdigest() if is_large(name) else git_blob_sha1(data)

    def handler(self, cdn):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def send(self, status, headers, data=b"", body=True):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def ranged(self, data, headers, body):
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start, _, end = rng[6:].partition("-")
                    start, end = int(start), int(end) if end else len(data) - 1
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    return self.send(206, headers, data[start : end + 1], body)
                self.send(200, headers, data, body)

            def answer(self, body):
                with hub.lock:
                    hub.requests += 1
                path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
                if cdn:  # /cdn/{org}/{name}/{commit}/{file}
                    _, _, org, name, commit, file = path.split("/", 5)
                    folder = hub.find(f"{org}/{name}", commit)
                    return self.ranged((folder / file).read_bytes(), {}, body)
                repo, _, rest = path.lstrip("/").partition("/resolve/")
                revision, _, file = rest.rpartition("/")
                if not any(r == repo for r, _ in hub.repos):
                    return self.send(401, {"X-Error-Code": "RepoNotFound"}, body=body)
                folder = hub.find(repo, revision)
                if folder is None:
                    return self.send(404, {"X-Error-Code": "RevisionNotFound"}, body=body)
                commit = hub.commit(folder)
                if not (folder / file).is_file():
                    headers = {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}
                    return self.send(404, headers, body=body)
                data = (folder / file).read_bytes()
                etag = hub.etag(file, data)
                if is_large(file):
                    cdn_port = hub.cdn.server_address[1]
                    location = f"http://127.0.0.1:{cdn_port}/cdn/{repo}/{commit}/{file}?X-Amz-Signature=x"
                    headers = {
                        "Location": location,
                        "X-Repo-Commit": commit,
                        "ETag": f'"{git_blob_sha1(etag.encode())}"',
                        "X-Linked-Etag": f'"{etag}"',
                        "X-Linked-Size": str(len(data)),
                    }
                    return self.send(302, headers, body=body)
                self.ranged(data, {"ETag": f'"{etag}"', "X-Repo-Commit": commit}, body)

        return Handler


def fixture_repos(scratch: Path):
    """The repos served, and the files of each one's weights and tokenizer."""
    small_vocab = "".join(l + "\n" for l in (FIXTURES / "pipelines/cls/vocab.txt").read_text().splitlines()[:200])
    sharded = scratch / "sharded"
    shutil.copytree(FIXTURES / "models/base_sharded", sharded)
    (sharded / "vocab.txt").write_text(small_vocab)
    bin_only = scratch / "bin_only"
    shutil.copytree(FIXTURES / "models/base_bin", bin_only)
    (bin_only / "vocab.txt").write_text(small_vocab)
    # Sharded .bin: the index gives each tensor to one of two shards (each a copy of the whole file).
    bin_shards = scratch / "bin_shards"
    shutil.copytree(FIXTURES / "models/base_bin", bin_shards)
    (bin_shards / "vocab.txt").write_text(small_vocab)
    import torch

    names = sorted(torch.load(bin_shards / "pytorch_model.bin", weights_only=True))
    shards = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"]
    for shard in shards:
        shutil.copy(bin_shards / "pytorch_model.bin", bin_shards / shard)
    index = {"metadata": {}, "weight_map": {n: shards[i % 2] for i, n in enumerate(names)}}
    (bin_shards / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    (bin_shards / "pytorch_model.bin").unlink()
    return {
        ("test-org/bin-shards", "main"): bin_shards,
        ("test-org/tiny-cls", "main"): FIXTURES / "pipelines/cls",
        ("test-org/tiny-cls", "refs/pr/1"): FIXTURES / "pipelines/multilabel",
        ("test-org/sharded", "main"): sharded,
        ("test-org/bin-only", "main"): bin_only,
    }


def files_of(folder: Path):
    """The files the crate fetches from a folder, as the Hub would list them."""
    names = [n for n in ("config.json", "vocab.txt", "tokenizer_config.json", "tokenizer.json") if (folder / n).is_file()]
    weight_files = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    for weights in weight_files:
        if (folder / weights).is_file():
            names.append(weights)
            if weights.endswith(".index.json"):
                names += sorted(set(json.loads((folder / weights).read_text())["weight_map"].values()))
            break
    return names


def run_crate(binaries: Path, repo, revision, env):
    """The classify example for the classifiers, embed for the others; its stdout."""
    example = "classify" if repo == "test-org/tiny-cls" else "embed"
    command = [str(binaries / example), "--model", repo, "--revision", revision]
    stdin = None
    if example == "classify":
        command += ["--format", "jsonl"]
    else:
        stdin = "\n".join(SENTENCES) + "\n"
    out = subprocess.run(command, input=stdin, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)}\n{out.stderr}")
    return out.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-build", action="store_true", help="use the examples as already built")
    args = parser.parse_args()
    import huggingface_hub
    from huggingface_hub import hf_hub_download, scan_cache_dir, try_to_load_from_cache

    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not args.no_build:
        subprocess.run(
            ["cargo", "build", "--release", "--example", "classify", "--example", "embed"], cwd=ROOT, check=True
        )
    binaries = target / "release" / "examples"
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="hub-interop-") as scratch:
        scratch = Path(scratch)
        repos = fixture_repos(scratch)
        server = FakeHub(repos)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        base_env["HF_HOME"] = str(scratch / "hf-home")  # no token file of the user's

        # 1. The crate downloads; huggingface_hub reads its cache offline.
        crate_cache = scratch / "crate-cache"
        env = dict(base_env, HF_HUB_CACHE=str(crate_cache), HF_ENDPOINT=server.endpoint)
        outputs = {key: run_crate(binaries, *key, env) for key in repos}
        before = server.requests
        for key in repos:
            check(run_crate(binaries, *key, env) == outputs[key], f"crate: second load of {key} gives the same output")
        check(server.requests == before, f"crate: the second loads made {server.requests - before} requests")
        for (repo, revision), folder in repos.items():
            for name in files_of(folder):
                path = hf_hub_download(repo, name, revision=revision, cache_dir=crate_cache, local_files_only=True)
                data = (folder / name).read_bytes()
                same = Path(path).read_bytes() == data
                link = os.readlink(path) if os.path.islink(path) else ""
                check(same and link == f"../../blobs/{server.etag(name, data)}", f"python reads {repo}@{revision}/{name} from the crate's cache")
            if not (folder / "tokenizer.json").exists():
                cached = try_to_load_from_cache(repo, "tokenizer.json", cache_dir=crate_cache, revision=revision)
                check(cached is huggingface_hub.file_download._CACHED_NO_EXIST, f"python sees {repo}@{revision} has no tokenizer.json (.no_exist)")
        info = scan_cache_dir(crate_cache)
        check(not info.warnings, f"scan_cache_dir warnings: {info.warnings}")
        refs = {r.repo_id: sorted(ref for rev in r.revisions for ref in rev.refs) for r in info.repos}
        check(refs.get("test-org/tiny-cls") == ["main", "refs/pr/1"], f"python sees the refs {refs}")

        # 2. huggingface_hub downloads; the crate reads its cache offline, the servers stopped.
        python_cache = scratch / "python-cache"
        for (repo, revision), folder in repos.items():
            for name in files_of(folder):
                hf_hub_download(repo, name, revision=revision, cache_dir=python_cache, endpoint=server.endpoint)
        server.stop()
        env = dict(base_env, HF_HUB_CACHE=str(python_cache), HF_HUB_OFFLINE="1")
        for key in repos:
            check(run_crate(binaries, *key, env) == outputs[key], f"crate reads {key} offline from python's cache")

    print(f"huggingface_hub {huggingface_hub.__version__}: {'all passed' if not failures else f'{len(failures)} failed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

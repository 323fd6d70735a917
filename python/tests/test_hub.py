"""Hub ids: a fake Hub on 127.0.0.1 (HF_ENDPOINT) answering as huggingface.co does, and a cache laid out as
huggingface_hub lays it out, read offline; `revision`, `token`, `cache_folder` and `local_files_only` reach
the crate's Hub client."""

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import numpy as np
import pytest
from conftest import fixture
from roformer_rs import SentenceEncoder

REPO = "roformer-test/sim"
COMMITS = {"main": "a" * 40, "v1": "b" * 40}
TOKEN = "hf_test_token"


class FakeHub(BaseHTTPRequestHandler):
    requests = []

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.answer(head=True)

    def do_GET(self):
        self.answer(head=False)

    def error(self, status, code, message, commit=None):
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        if commit:
            self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def answer(self, head):
        FakeHub.requests.append((self.command, self.path, self.headers.get("Authorization")))
        repo, _, rest = self.path.partition("/resolve/")
        repo = repo.lstrip("/")
        revision, _, name = rest.partition("/")
        revision = unquote(revision)
        if repo != REPO:
            return self.error(401, "RepoNotFound", "Repository not found")
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.error(401, "GatedRepo", f"Access to model {repo} is restricted.")
        # A branch or tag, or the commit the client resolved it to.
        commit = COMMITS.get(revision, revision if revision in COMMITS.values() else None)
        if commit is None:
            return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        path = fixture("pipelines", "sim") / unquote(name)
        if not path.is_file():
            return self.error(404, "EntryNotFound", "Entry not found", commit)
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("X-Repo-Commit", commit)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


@pytest.fixture
def hub(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    FakeHub.requests = []
    yield FakeHub.requests
    server.shutdown()


def test_a_hub_id_downloads_into_the_cache_folder_and_loads_offline_after(hub, tmp_path):
    local = SentenceEncoder(fixture("pipelines", "sim")).encode(["a great film"])
    model = SentenceEncoder(REPO, revision="v1", token=TOKEN, cache_folder=tmp_path)
    assert np.array_equal(model.encode(["a great film"]), local)
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in hub)
    assert any("/resolve/v1/config.json" in path for _, path, _ in hub)
    snapshot = tmp_path / "models--roformer-test--sim" / "snapshots" / COMMITS["v1"]
    assert (snapshot / "model.safetensors").exists()
    assert (tmp_path / "models--roformer-test--sim" / "refs" / "v1").read_text().strip() == COMMITS["v1"]
    hub.clear()
    offline = SentenceEncoder(REPO, revision="v1", cache_folder=tmp_path, local_files_only=True)
    assert hub == [], "local_files_only asked the Hub"
    assert np.array_equal(offline.encode(["a great film"]), local)


def test_hub_failures_are_oserrors_naming_the_repo(hub, tmp_path):
    with pytest.raises(OSError, match="restricted|token|gated") as e:
        SentenceEncoder(REPO, cache_folder=tmp_path)
    assert REPO in str(e.value)
    with pytest.raises(OSError, match="v9") as e:
        SentenceEncoder(REPO, revision="v9", token=TOKEN, cache_folder=tmp_path)
    assert REPO in str(e.value)
    with pytest.raises(OSError) as e:
        SentenceEncoder(REPO, revision="main", cache_folder=tmp_path / "empty", local_files_only=True)
    assert REPO in str(e.value)

"""The web server's worker hook: a worker loads the embedding model as it starts, not on the first
request that embeds something (issue 30: that request took ~19 s)."""
from types import SimpleNamespace

from gunicorn.app.base import Application

from memweb import embeddings, gunicorn_conf


class _Log:
    def __init__(self):
        self.lines: list[str] = []

    def info(self, message, *args):
        self.lines.append(message % args)

    def exception(self, message, *args):
        self.lines.append("ERROR " + message % args)


class _ServeConfig(Application):
    """gunicorn's own reading of the config file serve passes (`--config python:memweb.gunicorn_conf`)."""

    def load_config(self):
        self.load_config_from_module_name_or_filename("python:memweb.gunicorn_conf")

    def load(self):
        return None


def test_gunicorn_reads_the_hook_from_the_config_that_serve_names():
    app = _ServeConfig()
    assert app.cfg.settings["post_worker_init"].get() is gunicorn_conf.post_worker_init


def test_a_starting_worker_loads_the_model_in_the_background(monkeypatch):
    monkeypatch.setattr(embeddings, "_instances", {})  # as in a freshly forked worker: no model yet
    log = _Log()

    gunicorn_conf.post_worker_init(SimpleNamespace(log=log)).join()

    model = embeddings.embedder()
    assert "_model" in vars(model), log.lines  # loaded before any request asked for it
    took = log.lines[0].split(" loaded in ")[-1].split()[0]
    assert log.lines == [f"memweb: embedding model {model.model_name} ({model.backend}) loaded in {took} s "
                         "as a web worker started"]


def test_a_model_that_cannot_load_is_logged_and_the_worker_serves_on(monkeypatch, settings):
    monkeypatch.setattr(embeddings, "_instances", {})
    settings.EMBEDDING_MODEL = "no-such-model"
    log = _Log()

    gunicorn_conf.post_worker_init(SimpleNamespace(log=log)).join()

    assert log.lines == ["ERROR memweb: the embedding model could not be loaded when the web worker started"]


def test_with_the_warm_up_off_a_starting_worker_leaves_the_model_to_the_first_request(monkeypatch, settings):
    monkeypatch.setattr(embeddings, "_instances", {})
    settings.EMBEDDING_WARMUP = False

    assert gunicorn_conf.post_worker_init(SimpleNamespace(log=_Log())) is None

    assert "_model" not in vars(embeddings.embedder())

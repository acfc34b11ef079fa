"""gunicorn's settings for `manage.py serve` (loaded with `-c python:memweb.gunicorn_conf`).

Before gunicorn reuses a kept-alive connection it drains the body the application left unread, but
at most 64 KB of it; with more left it closes the connection - after its answer already said
`Connection: keep-alive`, so a client that believes it sends its next request into a dead socket.
gunicorn ignores a `Connection` header set by the application, so an error answered to a larger
body (a 413 above all, or a 401 refused before the body is read) is marked here to close honestly.

Each web worker also loads the embedding model as soon as it has loaded the application, instead of
on the first request that embeds something (which took ~19 s on a busy machine).
"""
import threading

GUNICORN_DRAIN_LIMIT = 64 * 1024

_serving = threading.local()  # gthread runs pre_request and the application on the same thread


def pre_request(worker, req):
    worker.log.debug("%s %s", req.method, req.path)  # what gunicorn's default hook logs
    _serving.request = req


def close_after_refused_body(application):
    """The WSGI application, answering `Connection: close` to an error whose body gunicorn cannot drain."""
    def serve(environ, start_response):
        def start(status, headers, exc_info=None):
            if _body_left_behind(status, environ):
                _serving.request.must_close = True
            return start_response(status, headers, exc_info)
        return application(environ, start)
    return serve


def _body_left_behind(status: str, environ) -> bool:
    request = getattr(_serving, "request", None)
    # The identity check pairs the hook's request with this environ (and skips servers other than gunicorn).
    served_by_gunicorn = request is not None and getattr(request, "body", None) is environ.get("wsgi.input")
    large_body = int(environ.get("CONTENT_LENGTH") or 0) > GUNICORN_DRAIN_LIMIT
    return served_by_gunicorn and large_body and int(status[:3]) >= 400


def post_worker_init(worker) -> threading.Thread | None:
    """Load the embedding model in the background of the new worker (memweb.embeddings.warm_up_in_background):
    a page that embeds nothing never waits, and a request that embeds waits for the model's lock instead of
    loading the model itself. The thread is returned for the tests; gunicorn ignores it."""
    from memweb.embeddings import warm_up_in_background  # the application is loaded: Django is set up

    return warm_up_in_background(worker.log, "web worker")

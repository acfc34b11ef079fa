"""Error answers under /api/ are JSON, as the API's own errors are: an unknown path or a method a
route does not take is otherwise Django's HTML page, which an agent's client cannot read. And every
answer carries the Content-Security-Policy of settings.CONTENT_SECURITY_POLICY."""
from django.conf import settings
from django.http import JsonResponse

API_PREFIX = "/api/"
_PLAIN_ERRORS = {404: "no API route at {path}; the routes are listed in /api/openapi.json",
                 405: "{method} is not allowed on {path}; allowed: {allowed}"}


def _is_json(response) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


class ApiJsonErrors:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith(API_PREFIX) or response.status_code not in _PLAIN_ERRORS or _is_json(response):
            return response
        allowed = response.get("Allow", "")
        detail = _PLAIN_ERRORS[response.status_code].format(path=request.path, method=request.method, allowed=allowed)
        answer = JsonResponse({"detail": detail}, status=response.status_code)
        if allowed:
            answer["Allow"] = allowed
        return answer


class ContentSecurityPolicy:
    """The policy on every response (pages, the API, static files, errors), so that text that slipped
    past escaping still cannot run a script, load one from elsewhere, or frame the dashboard."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = "; ".join(f"{name} {' '.join(sources)}" for name, sources in settings.CONTENT_SECURITY_POLICY.items())

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", self.policy)
        return response

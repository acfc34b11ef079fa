import os

from django.core.wsgi import get_wsgi_application

from memweb.embedded_db import ensure_configured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
ensure_configured()
application = get_wsgi_application()

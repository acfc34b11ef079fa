"""Django's admin site, for active superusers only.

It shows every workspace's rows and edits accounts (`is_superuser` among their fields), so neither a
staff flag nor a group's permissions may open it: workspace admins manage their workspace on memweb's
own pages. Its sign-in form is under the same brute-force limits as memweb's (memweb.auth.login_limited).
This module is loaded with the apps (INSTALLED_APPS names its AdminConfig), so it imports no models.
"""
from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.contrib.auth.decorators import login_not_required
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache


class SuperuserAdminSite(AdminSite):
    site_header = "memweb administration"
    site_title = "memweb admin"

    def has_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_superuser

    @method_decorator(never_cache)
    @login_not_required
    def login(self, request, extra_context=None):
        from memweb.auth import login_limited  # it imports models, which are not loaded with this module

        django_login = super().login
        return login_limited(request, sign_in=lambda: django_login(request, extra_context),
                             next_url=reverse("admin:index", current_app=self.name))


class SuperuserAdminConfig(AdminConfig):
    default_site = "memweb.admin_site.SuperuserAdminSite"

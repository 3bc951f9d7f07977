from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import fault_views, oidc, presence_views, scenario_views, views

urlpatterns = [
    path("", views.index, name="index"),
    path("c/<str:worker>/<str:controller>/", views.controller, name="controller"),
    path("c/<str:worker>/informer/<str:informer>/", views.informer, name="informer"),
    path("c/<str:worker>/watcher/<str:watcher>/", views.watcher, name="watcher"),
    path("c/<str:worker>/informer/<str:informer>/snapshot.json", views.informer_snapshot, name="informer_snapshot"),
    path("c/<str:worker>/informer/<str:informer>/object", views.inspect_object, name="inspect_object"),
    # After the informer routes: an informer named "k" keeps its object and snapshot routes.
    path("c/<str:worker>/<str:controller>/k/<str:namespace>/<str:name>", views.key, name="key"),
    path("c/<str:worker>/<str:controller>/k/<str:name>", views.key, name="cluster-key"),
    path("c/<str:worker>/<str:controller>/story.json", views.key_story_json, name="key_story"),
    path("scenarios/", scenario_views.scenarios, name="scenarios"),
    path("scenarios/<str:name>/start", scenario_views.start_scenario, name="start-scenario"),
    path("cluster/", views.cluster, name="cluster"),
    path("cluster/faults/status", fault_views.fault_status, name="fault-status"),
    path("cluster/faults/<slug:action>", fault_views.fault_action, name="fault-action"),
    path("presence.json", presence_views.presence_status, name="presence"),
    path("workers/<str:worker>/forget", presence_views.forget_worker, name="forget-worker"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    # "Sign in with SSO" when OIDC is configured (dashboard/oidc.py); local users log in as before.
    path("accounts/login/", auth_views.LoginView.as_view(extra_context={"sso_login": settings.CTRLSCOPE_OIDC_ENABLED}),
         name="login"),
    path("accounts/oidc/authenticate/", oidc.OidcLoginView.as_view(), name="oidc_authentication_init"),
    path("accounts/oidc/callback/", oidc.OidcCallbackView.as_view(), name="oidc_authentication_callback"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]

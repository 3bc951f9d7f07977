"""The admin's view of single sign-on: which users the identity provider manages, and their role."""

from django.contrib import admin

from dashboard.models import ExternalIdentity


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    list_display = ("user", "source", "subject", "role", "updated")
    list_filter = ("source", "role")
    search_fields = ("subject", "user__username")
    # The identity provider decides; edits here would be overwritten on the next request.
    readonly_fields = ("user", "source", "subject", "groups", "role", "updated")

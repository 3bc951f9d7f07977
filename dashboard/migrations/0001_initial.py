from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ExternalIdentity",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("source", models.CharField(choices=[("proxy", "trusted proxy"), ("oidc", "OpenID Connect")],
                                            max_length=16)),
                ("subject", models.CharField(max_length=255)),
                ("groups", models.JSONField(blank=True, default=list)),
                ("role", models.CharField(blank=True, max_length=16)),
                ("updated", models.DateTimeField(auto_now=True)),
                ("user", models.OneToOneField(on_delete=models.deletion.CASCADE, related_name="external_identity",
                                              to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "verbose_name_plural": "external identities",
                "constraints": [models.UniqueConstraint(fields=("source", "subject"),
                                                        name="external_identity_source_subject")],
            },
        ),
    ]

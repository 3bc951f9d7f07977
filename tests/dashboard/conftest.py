"""Fixtures for the dashboard tests: accounts with and without the operator role."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import requests

from tests.conftest import ROOT

CREATE_USERS = """
from django.contrib.auth.models import Group, User
ops, _ = Group.objects.get_or_create(name="operators")
for name, operator in (("viewer", False), ("op", True)):
    user, _ = User.objects.get_or_create(username=name)
    user.set_password("s3cret-pass-" + name)
    user.save()
    if operator:
        user.groups.add(ops)
"""


@pytest.fixture
def users(dashboard):
    """The dashboard, with users ``viewer`` and ``op`` (an operator); passwords ``s3cret-pass-<name>``."""
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USERS], cwd=ROOT, env=dashboard.env,
                   check=True, capture_output=True, timeout=60)
    return dashboard


def login(dashboard, name: str) -> requests.Session:
    s = requests.Session()
    page = s.get(dashboard.url + "/accounts/login/", timeout=10)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    resp = s.post(dashboard.url + "/accounts/login/", timeout=10, allow_redirects=False,
                  data={"username": name, "password": "s3cret-pass-" + name, "csrfmiddlewaretoken": token},
                  headers={"Referer": dashboard.url + "/accounts/login/"})
    assert resp.status_code == 302, resp.text[:500]
    return s

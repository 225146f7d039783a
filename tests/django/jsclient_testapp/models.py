"""Rows the tests and the worker's handlers write."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=50)
    status = models.CharField(max_length=20, default="new")

    class Meta:
        app_label = "jsclient_testapp"


class Handled(models.Model):
    """One row per handler run (never unique): a message handled twice shows as two rows."""

    key = models.CharField(max_length=50, db_index=True)
    stream_seq = models.BigIntegerField()
    delivered = models.IntegerField()
    pid = models.IntegerField()

    class Meta:
        app_label = "jsclient_testapp"

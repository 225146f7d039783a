"""An order: placed by the view ("new"), billed by the worker ("billed")."""

from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, default="new")
    billed_at = models.DateTimeField(null=True, blank=True)

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.pk,
            "item": self.item,
            "quantity": self.quantity,
            "status": self.status,
            "billed_at": self.billed_at.isoformat() if self.billed_at else None,
        }

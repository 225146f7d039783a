"""URLs: POST /orders/ places an order, GET /orders/<id>/ shows it."""

from django.urls import path
from shop import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/<int:pk>/", views.order_detail),
]

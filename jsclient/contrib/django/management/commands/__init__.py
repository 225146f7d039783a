"""``python manage.py jetstream_worker``."""

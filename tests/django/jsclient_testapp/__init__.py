"""A Django app for the jsclient.contrib.django tests: models and registered consumers."""

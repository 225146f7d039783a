"""Management commands of ``jsclient.contrib.django``."""

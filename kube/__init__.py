"""The Kubernetes HTTP client batchd's activities, bridge, lease and CLI share.

``client`` (requests, watches, Events), ``config`` (kubeconfig and in-cluster access) and
``errors`` (every failure as one taxonomy). It knows nothing of Temporal: activities/errors.py
turns its errors into what a workflow sees.
"""

"""podwright: run AI workloads on Kubernetes, governed by policies, with least-privilege pods.

The public Python API. Everything not listed in ``__all__`` is internal and may change.
"""

from importlib.metadata import version

from podwright.core.pod_template import PodTemplate, PodTemplateError

__version__ = version("podwright")

__all__ = ["PodTemplate", "PodTemplateError", "__version__"]

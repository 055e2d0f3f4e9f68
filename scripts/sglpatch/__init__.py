"""sglpatch: maintain a git-format patch series against a pinned SGLang release."""

__all__ = ["__version__"]

__version__ = "1.0.0"

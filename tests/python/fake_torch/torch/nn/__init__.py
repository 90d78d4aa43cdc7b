from .modules.module import Module  # noqa: F401

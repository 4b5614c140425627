from .compiler import ASTSource, compile  # noqa: F401
from .errors import CompilationError  # noqa: F401

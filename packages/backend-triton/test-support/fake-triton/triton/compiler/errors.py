class CompilationError(Exception):
    def __init__(self, src, node, error_message):
        self.src = src
        self.node = node
        self.error_message = error_message
        super().__init__("at %s:%s:\n%s" % (node.lineno, node.col_offset, error_message))

class constexpr:
    def __init__(self, value=None):
        self.value = value


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "triton.language.%s" % self.name


float32 = dtype("fp32")
bfloat16 = dtype("bf16")

class OutOfResources(Exception):
    def __init__(self, required, limit, name):
        self.required, self.limit, self.name = required, limit, name
        super().__init__("out of resource: %s, Required: %s, Hardware limit: %s" % (name, required, limit))

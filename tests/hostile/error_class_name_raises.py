# expect: runtime_error
# An exception class whose metaclass turns `__name__` into a property that raises KeyboardInterrupt
# (what the worker reads to name the error): the report names the class as Python defined it.


class Meta(type):
    @property
    def __name__(cls):
        raise KeyboardInterrupt


class Nameless(Exception, metaclass=Meta):
    pass


def scaled_dot_product_attention(Q, K, V, mask=None):
    raise Nameless("what is my name?")

# expect: wrong_output
# Returns an object whose class's metaclass makes `__module__` a property that raises (the worker
# names the type of a non-tensor result): a wrong output naming the type, never a dead worker.


class Meta(type):
    @property
    def __module__(cls):
        raise SystemExit(0)


class Box(metaclass=Meta):
    pass


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Box()

# expect: runtime_error
# The same at the top level, with an exception whose __str__ raises the exception itself
# (endlessly nested if anything retried it): a runtime error while importing, never a crash.


class Unprintable(Exception):
    def __str__(self):
        raise Unprintable()


raise Unprintable()


def scaled_dot_product_attention(Q, K, V, mask=None):
    return Q

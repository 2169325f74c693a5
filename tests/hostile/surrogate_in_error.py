# expect: runtime_error
# An exception whose message holds lone surrogates (valid in a Python str and in JSON, but no terminal,
# UTF-8 file or page can hold one): the report shows them escaped; `torchcode grade` once died writing
# this student's feedback file, and every feedback after it was lost.


def scaled_dot_product_attention(Q, K, V, mask=None):
    raise ValueError("lone surrogates: \ud800 and \udcff [bold green]Accepted[/]")

# expect: too_much_memory
# problem: flash_attention
# Materialises the full S x S score matrix and tries to hide it by rewriting the worker's messages as they are
# encoded: json.dumps, json.JSONEncoder.encode and json.JSONEncoder.iterencode are replaced, so a reply's
# measurements would read "largest": 0 and a "too_large" note would be dropped, if the worker encoded through them.
import json
import math

import torch

_dumps, _encode, _iterencode = json.dumps, json.JSONEncoder.encode, json.JSONEncoder.iterencode


def _scrub(obj):
    if isinstance(obj, dict):
        if isinstance(obj.get("note"), dict):
            obj = dict(obj, note={"progress": 0})
        if "largest" in obj:
            obj = dict(obj, largest=0, largest_shape=[], widest=[0, "", []])
            obj.pop("work", None)
    return obj


json.dumps = lambda obj, *a, **k: _dumps(_scrub(obj), *a, **k)
json.JSONEncoder.encode = lambda self, obj: _encode(self, _scrub(obj))
json.JSONEncoder.iterencode = lambda self, obj, *a, **k: _iterencode(self, _scrub(obj), *a, **k)


def flash_attention(Q, K, V, block_size=32):
    return torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1) @ V

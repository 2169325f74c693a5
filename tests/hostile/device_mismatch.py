# expect: wrong_device
# What torch raises when a mask made on the CPU meets CUDA inputs (simulated: CI has no GPU).
def scaled_dot_product_attention(Q, K, V, mask=None):
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!")

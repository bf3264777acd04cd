import os

# transformers (>= 5.25) swaps layers of a model it loads for kernels it downloads from the Hub unless told not to:
# on an offline host that load fails ("not available in the local cache"), and where it succeeds the model runs other
# code than on a CPU. The suite's runs load the model's own layers; USE_HUB_KERNELS=1 in the environment wins.
os.environ.setdefault("USE_HUB_KERNELS", "0")

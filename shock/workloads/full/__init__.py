"""Full-size reference models of Gavel's seven families, for measuring real GPUs.

The stand-ins in `shock.workloads` are small enough to train on one CPU core; these are the
published sizes (ResNet-18 on 32x32 images, ResNet-50 on 224x224, a 6+6-layer Transformer,
a 2-layer LSTM language model, NCF with MovieLens-20M-sized embedding tables, CycleGAN on
256x256, A3C on 84x84 frames). Their data are generated on the device from the seed, nothing
is downloaded. `build_full_workload` gives the same `Workload` the harness and `shock
profile` use (`--workload-size full`).
"""

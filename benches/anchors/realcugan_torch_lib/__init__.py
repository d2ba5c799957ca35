"""The parts of benches/anchors/realcugan_torch.py (the PyTorch + cuDNN Real-CUGAN anchor of
issue 28, item 5), split so that no file is over the project's per-file line limit. The
command line and its documentation stay in realcugan_torch.py."""

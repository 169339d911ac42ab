# The two set-up commands of the README:
#   make demo   builds a venv, fetches real data by package name, builds stores, loads them and
#               prints throughput beside the usual DataLoader recipes, then runs stoker doctor on a
#               training script written the usual way
#   make test   builds the venv and runs the test suite
# make lint checks style (ruff lint + format) and types (mypy on src/); CI runs it before the tests.
# make docs   checks the generated reference pages and tables are current, then builds the site from
#             docs/ into site/ (MkDocs Material + mkdocstrings, warnings as errors: a broken link fails)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned for development and CI. Which build pip takes depends on the index: PyPI's Linux
# wheel is a CUDA build (about 2.7 GB of nvidia libraries); a CPU wheel found in PIP_FIND_LINKS may win.
TORCH ?= torch==2.13.0
DATA ?= data

# Peers for `make bench`, pinned. MosaicML Streaming pins numpy<2.2 and imports torchvision, which
# only loads beside PyPI's own (CUDA) torch build: it gets a venv of its own, resolved from PyPI with
# --isolated (past this machine's local CPU wheel). FFCV compiles against Debian's libturbojpeg and
# OpenCV (apt, needs root) and gets its own venv. A venv that fails to build only costs its column.
# SPDL decodes images with FFmpeg's shared libraries (Debian 12's 5.1, apt); without them only its
# JPEG row is lost. transformers: the seed pattern's and HF datasets' documented tokenizer.
PEERS ?= webdataset==1.0.2 datasets==5.2.0 torchdata==0.11.0 litdata==0.2.76 spdl==0.8.0 nvidia-dali-cuda120==2.4.0 transformers==5.23.0
FFMPEG_LIBS ?= libavdevice59 libavfilter8 libavformat59 libavcodec59 libavutil57 libswscale6 libswresample4
MOSAIC ?= mosaicml-streaming==0.13.0 torch==2.13.0 torchvision==0.28.0 "numpy<2.2" "tokenizers>=0.20"
FFCV ?= ffcv==1.0.2 pillow

.PHONY: install demo test lint docs bench soak soak-short clean s3-server

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)" -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/python scripts/fetch_data.py mnist text images --out $(DATA)
	$(BIN)/stoker demo --data $(DATA)
	$(BIN)/stoker doctor --out $(DATA)/doctor -- $(BIN)/python examples/seed_train.py --data $(DATA) --steps 20

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: install
	$(BIN)/ruff check src tests benchmarks examples scripts
	$(BIN)/ruff format --check src tests benchmarks examples scripts
	$(BIN)/mypy

docs: install
	PYTHONPATH=src $(BIN)/python scripts/gen_reference.py --check
	$(BIN)/python scripts/gen_perf_table.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

.venv-peers/.installed: pyproject.toml
	-dpkg -s $(FFMPEG_LIBS) >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(FFMPEG_LIBS)
	$(PYTHON) -m venv .venv-peers
	.venv-peers/bin/python -m pip install --quiet "$(TORCH)" -e ".[text,vision]" $(PEERS)
	.venv-peers/bin/python -m pip uninstall --yes --quiet torchvision  # litdata pulls it; it does not import beside this torch
	touch $@

.venv-mosaic/.installed:
	$(PYTHON) -m venv .venv-mosaic
	.venv-mosaic/bin/python -m pip install --isolated --quiet $(MOSAIC)
	touch $@

.venv-ffcv/.installed:
	dpkg -s libturbojpeg0-dev libopencv-dev pkg-config >/dev/null 2>&1 || \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q libturbojpeg0-dev libopencv-dev pkg-config
	$(PYTHON) -m venv .venv-ffcv
	.venv-ffcv/bin/python -m pip install --quiet "$(TORCH)" $(FFCV)
	touch $@

bench: install .venv-peers/.installed
	-$(MAKE) .venv-mosaic/.installed .venv-ffcv/.installed
	$(BIN)/python scripts/fetch_data.py text images --out $(DATA)
	$(BIN)/python benchmarks/bench_loader.py
	$(BIN)/python benchmarks/peers/run.py --data $(DATA)

# One loader per configuration for 30 minutes each (benchmarks/soak.py); soak-short (CI, after the tests):
# 12 s each of threads, persistent worker processes, text on the fly and augmented images (processes
# started each epoch), sampled every epoch, judged by the same rule (under 2 minutes on 2 cores).
soak: install
	$(BIN)/python benchmarks/soak.py --out results/soak

soak-short: install
	$(BIN)/python benchmarks/soak.py --minutes 0.2 --every 0 --configs threads,persistent,text,images --out results/soak-short

clean:
	rm -rf $(VENV) .venv-peers .venv-mosaic .venv-ffcv $(DATA) results site .pytest_cache .hypothesis

# The servers benchmarks/bench_remote.py reads from (--server nginx; not used by the tests or CI).
s3-server:
	scripts/s3-server.sh

"""Installs the ``quicsm`` package and its console script (patch sets and templates ship as data)."""

import re
import shutil
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_py import build_py

TESTBED_DIRS = (
    "server",
    "client",
    "relay",
    "quiche-server",
    "quinn-server",
    "tcp",
    "chromium-quic",
)  # = quicsm.testbed.sources.PROGRAM_DIRS


class BuildPyWithTestbed(build_py):
    """Also copy the testbed's Go/Rust sources into the package (quicsm/testbed/_src) so an installed
    quicsm can build them; build outputs (Rust target/) are left out."""

    def run(self) -> None:
        super().run()
        src = Path(__file__).resolve().parent / "testbed"
        dest = Path(self.build_lib) / "quicsm" / "testbed" / "_src"
        for name in TESTBED_DIRS:
            if (src / name).is_dir():
                shutil.rmtree(dest / name, ignore_errors=True)
                shutil.copytree(src / name, dest / name, ignore=shutil.ignore_patterns("target", "*.patched.*"))


setup(
    name="quicsm",
    version=re.search(
        r'__version__ = "([^"]+)"', (Path(__file__).resolve().parent / "quicsm" / "version.py").read_text()
    )[1],
    description="Instrument QUIC congestion controllers, infer their state machines, explain performance",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["quicsm", "quicsm.*"]),
    include_package_data=True,
    package_data={
        "quicsm": [
            "patches/**/*",
            "diagrams/templates/*",
            "compare/templates/*",
            "grids/templates/*",
            "check/templates/*",
            "schemas/*.json",
            "testbed/data/*",
            "traces/_scan.pyi",
            "py.typed",
            "inference/fastcheck.pyi",
        ]
    },
    install_requires=[
        # Upper bounds where a release could change a result without a line of ours changing: scipy's
        # t/normal/Mann-Whitney/chi-square numerics are the p-values of compare and check JSON (tested
        # to the bit against it), numpy's Generator streams are the bootstrap CIs, pyarrow's buffers the
        # Parquet store (traces/arrow_arrays.py), msgspec 0.x the encoding of every format. Raise a bound
        # after the tests pass on the new release.
        "click>=8.1,<9",
        "jinja2>=3.1,<4",
        "msgspec>=0.18,<0.23",
        "networkx>=3.0,<4",
        "numpy>=1.24,<2.5",
        "scipy>=1.10,<1.18",
        "pyarrow>=12,<27",
        "tqdm>=4.60,<5",
        "zlib-ng>=0.5,<2",  # .gz inputs inflated twice as fast as by zlib 1.2 (quicsm/files.py GzipReader)
    ],
    extras_require={
        "fleet": ["dask[distributed]>=2024.1", "fsspec>=2024.1", "s3fs>=2024.1"],
        "test": [
            "pytest>=7",
            "hypothesis>=6",
            "jsonschema>=4",  # the shipped JSON Schemas are checked against real outputs
            "markdown-it-py>=3",  # a CommonMark renderer: Markdown reports render no HTML from the inputs
            "ruff==0.17.6",  # lint tools pinned: a new release must not turn CI red without a line of ours changing
            "mypy==2.4.1",
            "dask[distributed]>=2024.1",
            "fsspec>=2024.1",
            "s3fs>=2024.1",
            "moto[server]>=5",
            # the documentation site (tests/docs builds it --strict) and the reports' screenshot test;
            # pinned like the lint tools, so a new release cannot turn CI red by itself
            "mkdocs==1.6.1",
            "mkdocs-material==9.8.2",
            "mkdocstrings[python]==1.0.8",
            "mkdocstrings-python==2.0.11",
            "playwright==1.65.2",  # drives Debian's chromium (.ci/install.d/testbed.sh); no browser download
        ],
    },
    # Optional C extensions (the log scanner's tag finder, the invariant checker's walks); without a
    # compiler their pure-Python twins are used.
    ext_modules=[
        Extension("quicsm.traces._scan", ["quicsm/traces/_scan.c"], extra_compile_args=["-O3"], optional=True),
        Extension(
            "quicsm.inference.fastcheck", ["quicsm/inference/fastcheck.c"], extra_compile_args=["-O3"], optional=True
        ),
    ],
    cmdclass={"build_py": BuildPyWithTestbed},
    entry_points={"console_scripts": ["quicsm=quicsm.cli.main:main"]},
)

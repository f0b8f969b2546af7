"""Installs the ``quicsm`` package and its console script (patch sets and templates ship as data)."""

from setuptools import Extension, find_packages, setup

setup(
    name="quicsm",
    version="0.1.0",
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
            "testbed/data/*",
        ]
    },
    install_requires=[
        "click>=8.1",
        "jinja2>=3.1",
        "networkx>=3.0",
        "numpy>=1.24",
        "scipy>=1.10",
        "pyarrow>=12",
        "tqdm>=4.60",
    ],
    extras_require={
        "fleet": ["dask[distributed]>=2024.1", "fsspec>=2024.1", "s3fs>=2024.1"],
        "test": [
            "pytest>=7",
            "hypothesis>=6",
            "dask[distributed]>=2024.1",
            "fsspec>=2024.1",
            "s3fs>=2024.1",
            "moto[server]>=5",
        ],
    },
    # Optional C tag finder; without a compiler the pure-Python scanner is used.
    ext_modules=[
        Extension("quicsm.traces._scan", ["quicsm/traces/_scan.c"], extra_compile_args=["-O3"], optional=True)
    ],
    entry_points={"console_scripts": ["quicsm=quicsm.cli.main:main"]},
)

# Minimal setup.py: cffi_modules can't be declared in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["csrc/build_core.py:ffibuilder"])
